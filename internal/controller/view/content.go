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
)

// The manager's memory must not grow with what MarkdownViews hold: a
// MarkdownView may carry 1 MiB of files, and so may its ConfigMap. The cache
// therefore keeps neither the files of a MarkdownView nor the data of a
// ConfigMap; it keeps their content hashes, computed by the transforms below
// before the bodies are dropped. The reconcile compares the two hashes and
// reads the MarkdownView's files from the API server only when they differ.
//
// Drift stays visible: the ConfigMap transform hashes the data the live
// object really holds, so an edit of the data by someone else changes the
// cached hash even when the annotation Trellis wrote is left as it was.

const (
	// contentHashAnnotation, on the ConfigMap, is the SHA-256 of the files
	// Trellis wrote into it (contentHash). On cached copies it means more:
	//   - a cached ConfigMap carries it only when the data it really holds
	//     has that hash (else it is removed), so it equals the MarkdownView's
	//     exactly when the ConfigMap is up to date;
	//   - a cached MarkdownView carries the hash of its own files (the
	//     ConfigMap content they make).
	contentHashAnnotation = "view.trellis.dev/content-sha256"
	// contentBytesAnnotation, on cached MarkdownViews only, is the size in
	// bytes the ConfigMap of its files takes, as the API server counts it.
	contentBytesAnnotation = "view.trellis.dev/content-bytes"
	// podBytesAnnotation, on cached MarkdownViews only, is the size of
	// spec.pod when it was dropped for being over maxPodSettingsBytes.
	podBytesAnnotation = "view.trellis.dev/pod-bytes"
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
// files by their hash and size, drops spec.pod when it is over its bound,
// and drops the labels and annotations (up to 256 KiB each, never read by
// the controller; the status patch never sends metadata).
func trimMarkdownView(in any) (any, error) {
	mv, ok := in.(*viewv1.MarkdownView)
	if !ok || (mv.Spec.Markdowns == nil && mv.Annotations[contentHashAnnotation] != "") {
		return in, nil // not ours, or trimmed already (a stored MarkdownView has at least one file)
	}
	data, binaryData := desiredContent(mv)
	annotations := map[string]string{
		contentHashAnnotation:  contentHash(data, binaryData),
		contentBytesAnnotation: strconv.Itoa(contentSize(data, binaryData)),
	}
	if pod, err := json.Marshal(mv.Spec.Pod); err != nil || len(pod) > maxPodSettingsBytes {
		annotations[podBytesAnnotation] = strconv.Itoa(len(pod))
		mv.Spec.Pod = viewv1.ViewerPod{}
	}
	mv.Spec.Markdowns, mv.Spec.Assets = nil, nil
	mv.Annotations, mv.Labels = annotations, nil
	mv.ManagedFields = nil
	return mv, nil
}

// trimConfigMap is the cache transform of ConfigMaps: it drops data,
// binaryData and managedFields (a ConfigMap is created and updated, never
// applied), and keeps the content-hash annotation only when it is the hash of
// the data the ConfigMap holds. (Applied twice, it would take the trimmed
// copy for an empty ConfigMap and drop the annotation: one needless rewrite,
// never a missed one. Informers transform each object once.)
func trimConfigMap(in any) (any, error) {
	cm, ok := in.(*corev1.ConfigMap)
	if !ok {
		return in, nil
	}
	if h, ok := cm.Annotations[contentHashAnnotation]; ok && h != contentHash(cm.Data, cm.BinaryData) {
		delete(cm.Annotations, contentHashAnnotation)
	}
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
