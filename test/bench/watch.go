package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// watchUntil lists, then watches, the objects of list's kind that opts
// select and in admits (nil: all), until done(objects seen, objects for
// which ok holds) says so, and
// returns when the event that made it so arrived. A watch, because listing
// a thousand objects every few hundred milliseconds would load the API
// server being measured, and load it more for whichever side has more to
// wait for.
func watchUntil(ctx context.Context, wc client.WithWatch, list client.ObjectList, in func(client.Object) bool, ok func(runtime.Object) bool,
	done func(seen, ok int) bool, timeout time.Duration, opts ...client.ListOption) (time.Time, error) {
	if in == nil {
		in = func(client.Object) bool { return true }
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	state := map[string]bool{}
	counts := func() (int, int) {
		good := 0
		for _, v := range state {
			if v {
				good++
			}
		}
		return len(state), good
	}
	for {
		l := list.DeepCopyObject().(client.ObjectList)
		if err := wc.List(ctx, l, opts...); err != nil {
			return time.Time{}, err
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return time.Time{}, err
		}
		clear(state)
		for _, it := range items {
			if obj := it.(client.Object); in(obj) {
				state[client.ObjectKeyFromObject(obj).String()] = ok(it)
			}
		}
		if done(counts()) {
			return time.Now(), nil
		}
		watchOpts := append(append([]client.ListOption{}, opts...), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.GetResourceVersion()}})
		w, err := wc.Watch(ctx, list.DeepCopyObject().(client.ObjectList), watchOpts...)
		if err != nil {
			return time.Time{}, err
		}
		for ev := range w.ResultChan() {
			obj, isObject := ev.Object.(client.Object)
			if !isObject || ev.Type == watch.Bookmark || ev.Type == watch.Error || !in(obj) {
				continue
			}
			if key := client.ObjectKeyFromObject(obj).String(); ev.Type == watch.Deleted {
				delete(state, key)
			} else {
				state[key] = ok(ev.Object)
			}
			if done(counts()) {
				w.Stop()
				return time.Now(), nil
			}
		}
		if ctx.Err() != nil {
			seen, good := counts()
			return time.Time{}, fmt.Errorf("%d seen, %d of them done: %w", seen, good, ctx.Err())
		}
		// The watch ended (it expired, or the API server restarted): list and watch again.
	}
}
