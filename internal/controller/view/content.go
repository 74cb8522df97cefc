package view

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/operate"
)

// The manager's memory must not grow with what MarkdownViews hold: a
// MarkdownView may carry 1 MiB of files, and so may its ConfigMap. The cache
// therefore keeps neither the files of a MarkdownView nor the data of a
// ConfigMap; it keeps their content hashes, computed by the transforms below
// before the bodies are dropped. The reconcile compares the two hashes and
// reads the MarkdownView's files from the API server only when they differ.
// Small contents (keptContentBytes, keptContentFiles) are the exception: a
// MarkdownView keeps them in the cache, which costs a few KiB per view at
// most and spares the read when its ConfigMap is written — most sites are
// a page or two.
//
// Drift stays visible: the ConfigMap transform hashes the data the live
// object really holds, whatever its annotations say.
//
// The transforms write their figures into annotations of the cached copy
// under keys the API server refuses (they contain spaces), so that no live
// object can carry them: a copy that has one was trimmed already. Client-go
// may hand an informer's transform an object it transformed before (the
// initial list of a watch-list is transformed into a temporary store and
// again when it replaces the informer's store), so a transform must know.

// contentHashAnnotation, on the ConfigMap, is the SHA-256 of the files
// Trellis wrote into it (contentHash): for people and tools, and checked
// like the data.
const contentHashAnnotation = "view.trellis.dev/content-sha256"

// Keys on cached copies only (invalid on the API server).
const (
	// cachedContentHash: on a MarkdownView, the hash of its files (the
	// ConfigMap content they make); on a ConfigMap, the hash of the data it
	// holds.
	cachedContentHash = "view.trellis.dev/content-sha256 (cached)"
	// cachedContentBytes, on a MarkdownView: the size in bytes the ConfigMap
	// of its files takes, as the API server counts it.
	cachedContentBytes = "view.trellis.dev/content-bytes (cached)"
	// cachedPodBytes, on a MarkdownView: the size of spec.pod, when it was
	// dropped for being over maxPodSettingsBytes.
	cachedPodBytes = "view.trellis.dev/pod-bytes (cached)"
	// cachedContentKept, on a MarkdownView: its files are small enough to
	// have been kept in the cache.
	cachedContentKept = "view.trellis.dev/content-kept (cached)"
)

// A MarkdownView whose files take at most keptContentBytes, in at most
// keptContentFiles files, keeps them in the cache. The file count bounds the
// maps' own overhead; together they keep a view under its 64 KiB
// (docs/performance.md, manager memory per MarkdownView).
const (
	keptContentBytes = 4 << 10
	keptContentFiles = 8
)

// maxPodSettingsBytes bounds spec.pod as JSON. It is cached (the Deployment
// is built from it), and some of its parts (affinity terms, label
// selectors) have no bound in the schema.
const maxPodSettingsBytes = 8 << 10

// desiredContent is the ConfigMap content of mv: exactly its files, Markdown
// as data and assets as binaryData (a file removed from the spec must
// disappear from the ConfigMap).
func desiredContent(mv *viewv1.MarkdownView) (map[string]string, map[string][]byte) {
	data := make(map[string]string, len(mv.Spec.Markdowns))
	for name, text := range mv.Spec.Markdowns {
		data[name] = string(text)
	}
	var binaryData map[string][]byte
	if len(mv.Spec.Assets) > 0 {
		binaryData = maps.Clone(mv.Spec.Assets)
	}
	return data, binaryData
}

// contentHash is the SHA-256 of a ConfigMap's data and binaryData: every
// key in order with its value, each length-prefixed and tagged with the map
// it came from, so no two different contents share an encoding.
func contentHash(data map[string]string, binaryData map[string][]byte) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		writeEntry(h, 'd', k, []byte(data[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(binaryData)) {
		writeEntry(h, 'b', k, binaryData[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writeEntry(h hash.Hash, tag byte, key string, value []byte) {
	var n [8]byte
	h.Write([]byte{tag})
	binary.BigEndian.PutUint64(n[:], uint64(len(key)))
	h.Write(n[:])
	h.Write([]byte(key))
	binary.BigEndian.PutUint64(n[:], uint64(len(value)))
	h.Write(n[:])
	h.Write(value)
}

// contentSize counts a ConfigMap's data as the API server does: keys and
// values, in bytes, of data and binaryData together.
func contentSize(data map[string]string, binaryData map[string][]byte) int {
	n := 0
	for k, v := range data {
		n += len(k) + len(v)
	}
	for k, v := range binaryData {
		n += len(k) + len(v)
	}
	return n
}

// trimMarkdownView is the cache transform of MarkdownViews: it replaces the
// files by their hash and size (keeping small ones as well), drops spec.pod
// when it is over its bound, and drops the labels, annotations, finalizers
// and owner references (up to 256 KiB each for the first two, bounded only
// by the object's size for the others; never read by the controller, and
// the status patch never sends metadata), but the reconcile-now annotation,
// which is bounded (operate.RequestedAt).
func trimMarkdownView(in any) (any, error) {
	mv, ok := in.(*viewv1.MarkdownView)
	if !ok {
		return in, nil
	}
	if _, trimmed := mv.Annotations[cachedContentHash]; trimmed {
		return mv, nil
	}
	data, binaryData := desiredContent(mv)
	size := contentSize(data, binaryData)
	annotations := map[string]string{
		cachedContentHash:  contentHash(data, binaryData),
		cachedContentBytes: strconv.Itoa(size),
	}
	if pod, err := json.Marshal(mv.Spec.Pod); err != nil || len(pod) > maxPodSettingsBytes {
		annotations[cachedPodBytes] = strconv.Itoa(len(pod))
		mv.Spec.Pod = viewv1.ViewerPod{}
	}
	if size <= keptContentBytes && len(data)+len(binaryData) <= keptContentFiles {
		annotations[cachedContentKept] = "true"
	} else {
		mv.Spec.Markdowns, mv.Spec.Assets = nil, nil
	}
	if v := operate.RequestedAt(mv); v != "" {
		annotations[operate.RequestedAtAnnotation] = v
	}
	mv.Annotations, mv.Labels = annotations, nil
	mv.Finalizers, mv.OwnerReferences = nil, nil
	mv.ManagedFields = nil
	return mv, nil
}

// trimConfigMap is the cache transform of ConfigMaps: it replaces data and
// binaryData by the hash of what they hold, and drops managedFields (a
// ConfigMap is created and updated, never applied). Labels and annotations
// stay: an update sends them back as they are.
func trimConfigMap(in any) (any, error) {
	cm, ok := in.(*corev1.ConfigMap)
	if !ok {
		return in, nil
	}
	if _, trimmed := cm.Annotations[cachedContentHash]; trimmed {
		return cm, nil
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[cachedContentHash] = contentHash(cm.Data, cm.BinaryData)
	cm.Data, cm.BinaryData = nil, nil
	cm.ManagedFields = nil
	return cm, nil
}

// cachedInt reads a number a transform put on a cached object (0 when absent).
func cachedInt(annotations map[string]string, key string) int {
	n, _ := strconv.Atoi(annotations[key])
	return n
}

// trimmedReader reads like its Reader and then trims the object as the
// cache does, so that an object read around the cache (a cache miss
// confirmed by the API server) looks like one read from it.
type trimmedReader struct {
	client.Reader
	trim func(any) (any, error)
}

func (r trimmedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	_, err := r.trim(obj)
	return err
}
