// Package bucketevents receives S3 bucket notifications and asks for an
// immediate check of the StorageBuckets of the buckets they name: an
// external event source of the StorageBucket controller, run on the leader.
package bucketevents

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
)

// TokenKey is the key of the bucket-events Secret that holds the shared token.
const TokenKey = "token"

// Receiver is an external event source: an HTTP endpoint for S3
// bucket notifications (versitygw's --event-webhook-url, or any sender of
// S3-style event records). Each notification triggers an immediate check of
// the StorageBuckets of the named buckets. Requests must carry the shared
// token from a Secret, as "Authorization: Bearer <token>" or, for senders that
// cannot set headers, "?token=<token>".
type Receiver struct {
	Addr      string
	Secret    client.ObjectKey
	APIReader client.Reader
	Cache     client.Reader
	// Checks asks for the check of a StorageBucket now.
	Checks Checks

	mu      sync.Mutex
	token   string
	tokenAt time.Time
}

// Checks is the StorageBucket controller, as the receiver asks it for checks.
type Checks interface {
	// CheckNow makes the bucket's check due now and queues it; false when
	// ctx ended first.
	CheckNow(ctx context.Context, b *storagev1.StorageBucket) bool
}

// NeedLeaderElection is true: events are only useful where the controller runs.
func (e *Receiver) NeedLeaderElection() bool { return true }

// Start serves until ctx ends.
func (e *Receiver) Start(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.Handle("/bucket-events", e)
	srv := &http.Server{Addr: e.Addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	ln, err := net.Listen("tcp", e.Addr)
	if err != nil {
		return fmt.Errorf("bucket events receiver: %w", err)
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.FromContext(ctx).Info("receiving bucket events", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// notification is the part of an S3 event record we read.
type notification struct {
	Records []struct {
		S3 struct {
			Bucket struct {
				Name string `json:"name"`
			} `json:"bucket"`
		} `json:"s3"`
	} `json:"Records"`
}

func (e *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	want, err := e.currentToken(r.Context())
	if err != nil {
		log.FromContext(r.Context()).Error(err, "reading the bucket events token")
		http.Error(w, "receiver not configured", http.StatusServiceUnavailable)
		return
	}
	if !validToken(r, want) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	var n notification
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&n); err != nil {
		http.Error(w, "not an S3 event notification", http.StatusBadRequest)
		return
	}
	seen := map[string]bool{}
	queued := 0
	for _, rec := range n.Records {
		name := rec.S3.Bucket.Name
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		list := &storagev1.StorageBucketList{}
		if err := e.Cache.List(r.Context(), list, client.MatchingFields{stores.BucketNameIndex: name}); err != nil {
			http.Error(w, "cannot look up buckets", http.StatusInternalServerError)
			return
		}
		for i := range list.Items {
			b := &list.Items[i]
			if !e.Checks.CheckNow(r.Context(), b) {
				return
			}
			queued++
		}
	}
	w.WriteHeader(http.StatusAccepted)
	_, _ = fmt.Fprintf(w, "queued %d checks\n", queued)
}

func validToken(r *http.Request, want string) bool {
	got := r.URL.Query().Get("token")
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		got = strings.TrimPrefix(h, "Bearer ")
	}
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// currentToken reads the token Secret at most every 30 seconds, so a rotated
// token takes effect without a restart and Secrets are never cached wholesale.
func (e *Receiver) currentToken(ctx context.Context) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.token != "" && time.Since(e.tokenAt) < 30*time.Second {
		return e.token, nil
	}
	s := &corev1.Secret{}
	if err := e.APIReader.Get(ctx, e.Secret, s); err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(s.Data[TokenKey]))
	if len(tok) < 16 {
		return "", fmt.Errorf("secret %s: key %q must hold a token of at least 16 characters", e.Secret, TokenKey)
	}
	e.token, e.tokenAt = tok, time.Now()
	return tok, nil
}
