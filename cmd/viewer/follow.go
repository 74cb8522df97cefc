package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/viewer"
)

// followMarkdownView loads the MarkdownView's files into mem, then keeps them
// current from a watch, re-establishing it whenever it ends.
func followMarkdownView(ctx context.Context, kubeconfig, ns, name string, mem *viewer.MemorySource, log *slog.Logger) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := viewv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	mv := &viewv1.MarkdownView{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mv); err != nil {
		return fmt.Errorf("reading MarkdownView %s/%s: %w", ns, name, err)
	}
	mem.Set(pagesOf(mv), mv.Spec.Assets)

	go func() {
		for ctx.Err() == nil {
			if err := watchOnce(ctx, c, ns, name, mv.ResourceVersion, mem); err != nil {
				log.Info("watch ended; retrying", "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(2 * time.Second):
				}
			}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mv); err == nil {
				mem.Set(pagesOf(mv), mv.Spec.Assets)
			}
		}
	}()
	return nil
}

func watchOnce(ctx context.Context, c client.WithWatch, ns, name, rv string, mem *viewer.MemorySource) error {
	w, err := c.Watch(ctx, &viewv1.MarkdownViewList{}, client.InNamespace(ns),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch closed")
			}
			if mv, isMV := ev.Object.(*viewv1.MarkdownView); isMV && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				mem.Set(pagesOf(mv), mv.Spec.Assets)
			}
		}
	}
}

// pagesOf returns the MarkdownView's Markdown files (its assets go to Set as
// they are).
func pagesOf(mv *viewv1.MarkdownView) map[string]string {
	files := make(map[string]string, len(mv.Spec.Markdowns))
	for k, v := range mv.Spec.Markdowns {
		files[k] = string(v)
	}
	return files
}
