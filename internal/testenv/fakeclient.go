package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// Verb is a kind of request a reconcile sends the API server, as Fake
// tells them apart.
type Verb string

// The verbs Fake tells apart; a write of a subresource other than the
// status is its name.
const (
	// Get is a read of the manager's cache (mgr.GetClient()).
	Get Verb = "get"
	// APIGet is a read past the cache, straight from the API server
	// (mgr.GetAPIReader()), as the controllers read Secrets.
	APIGet Verb = "apiget"
	// List is a list from the manager's cache.
	List Verb = "list"
	// APIList is a list straight from the API server.
	APIList Verb = "apilist"
	Create  Verb = "create"
	Update  Verb = "update"
	Patch   Verb = "patch"
	Delete  Verb = "delete"
	// Apply is a Server-Side Apply of an apply configuration.
	Apply Verb = "apply"
	// Status is a write of the status subresource (an update or a patch).
	Status Verb = "status"
)

// Fake is the API server of a reconcile table test: controller-runtime's
// fake client, whose requests a row can make fail (by verb, kind and
// name) and whose writes it counts.
//
// Client stands for the manager's client: its Get and List are cache reads
// (Get, List). APIReader stands for the manager's API reader: its reads
// are APIGet and APIList. Both read the same objects, unless Cache says
// how the cache differs.
//
// Like a real API server, and unlike controller-runtime's fake client, it
// gives an object created or applied without a UID one of its own
// ("uid-<kind>-<name>"), and an applier's managed fields never claim an
// empty status.
type Fake struct {
	Client    client.WithWatch
	APIReader client.Reader

	// Cache, when set, is what the manager's cache holds: it is given each
	// object Client reads (by Get, and each item of a List), may edit it
	// (a copy: trimmed, or behind the API server) and says whether the
	// cache holds it at all; one it does not reads as not found, and is
	// left out of a list. Its error is the read's.
	Cache func(obj client.Object) (held bool, err error)

	base client.WithWatch

	mu     sync.Mutex
	fail   map[request]error
	writes []request
	reads  []string
}

// request names what a failure applies to, or a write carried out: name is
// "<namespace>/<name>" for a namespaced object; an empty name is any object.
type request struct {
	verb       Verb
	kind, name string
}

// keyName is how a request names an object.
func keyName(key client.ObjectKey) string {
	if key.Namespace != "" {
		return key.Namespace + "/" + key.Name
	}
	return key.Name
}

func nameOf(obj client.Object) string { return keyName(client.ObjectKeyFromObject(obj)) }

// NewFake builds b (the scheme, the objects, the status subresources and
// the indexes are the test's to give it) into a Fake.
func NewFake(b *fake.ClientBuilder) *Fake {
	f := &Fake{base: b.Build(), fail: map[request]error{}}
	f.Client = interceptor.NewClient(f.base, f.funcs())
	f.APIReader = apiReader{f}
	return f
}

// Fail makes every request of verb on objects of kind (e.g. "Secret")
// answer err, until Heal.
func (f *Fake) Fail(verb Verb, kind string, err error) { f.FailNamed(verb, kind, "", err) }

// FailNamed makes the requests of verb on the object of kind named name
// ("<namespace>/<name>" for a namespaced object) answer err, until Heal. A
// list has no name: fail it with Fail.
func (f *Fake) FailNamed(verb Verb, kind, name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[request{verb, kind, name}] = err
}

// FailRequests fails each request its keys name, "<verb> <Kind>" or
// "<verb> <Kind> <name>" (as FailNamed), with its error: a table's rows can
// say what fails as data.
func (f *Fake) FailRequests(fails map[string]error) {
	for key, err := range fails {
		parts := strings.Fields(key)
		if len(parts) < 2 || len(parts) > 3 {
			panic(fmt.Sprintf("testenv: request %q is not \"<verb> <Kind> [<name>]\"", key))
		}
		parts = append(parts, "")
		f.FailNamed(Verb(parts[0]), parts[1], parts[2], err)
	}
}

// Others is the API server as another actor writes to it, while a
// reconcile runs: no failure injected, no write counted.
func (f *Fake) Others() client.Client { return f.base }

// Heal takes every injected failure away.
func (f *Fake) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = map[request]error{}
}

// Writes lists the writes the API server carried out, "<verb> <Kind>", in
// the order they came. A write that failed (made to, or refused as a real
// API server would: an object that exists, one that does not) is not among
// them.
func (f *Fake) Writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.writes))
	for _, w := range f.writes {
		out = append(out, string(w.verb)+" "+w.kind)
	}
	return out
}

// NamedWrites is Writes with the object each write was of, "<verb> <Kind>
// <name>" ("<namespace>/<name>" for a namespaced object).
func (f *Fake) NamedWrites() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.writes))
	for _, w := range f.writes {
		out = append(out, string(w.verb)+" "+w.kind+" "+w.name)
	}
	return out
}

// Count is how many writes of verb on objects of kind reached the API server.
func (f *Fake) Count(verb Verb, kind string) int {
	n := 0
	for _, w := range f.Writes() {
		if w == string(verb)+" "+kind {
			n++
		}
	}
	return n
}

// APIReads lists the reads that reached the API server past the cache,
// "<verb> <Kind>" (apiget, apilist), in the order they came.
func (f *Fake) APIReads() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reads...)
}

// ForgetWrites empties Writes and APIReads, for a test that counts from
// here on.
func (f *Fake) ForgetWrites() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes, f.reads = nil, nil
}

// request answers the failure injected for the request, if any, and
// records a read that passes. A write is recorded by wrote, once carried out.
func (f *Fake) request(verb Verb, kind, name string, write bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[request{verb, kind, name}]; err != nil {
		return err
	}
	if err := f.fail[request{verb, kind, ""}]; err != nil {
		return err
	}
	if !write && (verb == APIGet || verb == APIList) {
		f.reads = append(f.reads, string(verb)+" "+kind)
	}
	return nil
}

// wrote records a write of verb on the object of kind named name when err
// says it was carried out, and passes err on.
func (f *Fake) wrote(verb Verb, kind, name string, err error) error {
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, request{verb, kind, name})
	return nil
}

// kindOf is the kind of obj, or of the items of a list.
func (f *Fake) kindOf(obj runtime.Object) string {
	gvk, err := apiutil.GVKForObject(obj, f.base.Scheme())
	if err != nil {
		return "?"
	}
	return strings.TrimSuffix(gvk.Kind, "List")
}

// applied is the kind and name ("<namespace>/<name>" when namespaced) of
// an apply configuration (the generated ones carry both).
func applied(obj runtime.ApplyConfiguration) (kind, name string) {
	kind = "?"
	if k, ok := obj.(interface{ GetKind() *string }); ok && k.GetKind() != nil {
		kind = *k.GetKind()
	}
	var key client.ObjectKey
	if n, ok := obj.(interface{ GetName() *string }); ok && n.GetName() != nil {
		key.Name = *n.GetName()
	}
	if n, ok := obj.(interface{ GetNamespace() *string }); ok && n.GetNamespace() != nil {
		key.Namespace = *n.GetNamespace()
	}
	return kind, keyName(key)
}

// subVerb is the verb of a write of subresource sub.
func subVerb(sub string) Verb {
	if sub == "status" {
		return Status
	}
	return Verb(sub)
}

func (f *Fake) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, _ client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			kind := f.kindOf(obj)
			if err := f.request(Get, kind, keyName(key), false); err != nil {
				return err
			}
			if err := f.read(ctx, key, obj, opts...); err != nil {
				return err
			}
			if held, err := f.cached(obj); err != nil || held {
				return err
			}
			return apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(kind) + "s"}, key.Name)
		},
		List: func(ctx context.Context, _ client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := f.request(List, f.kindOf(list), "", false); err != nil {
				return err
			}
			if err := f.list(ctx, list, opts...); err != nil {
				return err
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				return err
			}
			held := items[:0]
			for _, item := range items {
				obj, ok := item.(client.Object)
				if !ok {
					return fmt.Errorf("list item %T is no object", item)
				}
				ok, err := f.cached(obj)
				if err != nil {
					return err
				}
				if ok {
					held = append(held, obj)
				}
			}
			return meta.SetList(list, held)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			kind := f.kindOf(obj)
			if err := f.request(Create, kind, nameOf(obj), true); err != nil {
				return err
			}
			if obj.GetUID() == "" {
				obj.SetUID(uidOf(kind, obj.GetName()))
			}
			return f.wrote(Create, kind, nameOf(obj), c.Create(ctx, obj, opts...))
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			kind := f.kindOf(obj)
			if err := f.request(Update, kind, nameOf(obj), true); err != nil {
				return err
			}
			return f.wrote(Update, kind, nameOf(obj), c.Update(ctx, obj, opts...))
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			kind := f.kindOf(obj)
			if err := f.request(Patch, kind, nameOf(obj), true); err != nil {
				return err
			}
			return f.wrote(Patch, kind, nameOf(obj), c.Patch(ctx, obj, patch, opts...))
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			kind, name := applied(obj)
			if err := f.request(Apply, kind, name, true); err != nil {
				return err
			}
			if err := f.wrote(Apply, kind, name, c.Apply(ctx, obj, opts...)); err != nil {
				return err
			}
			return f.identify(ctx, obj, kind)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			kind := f.kindOf(obj)
			if err := f.request(Delete, kind, nameOf(obj), true); err != nil {
				return err
			}
			return f.wrote(Delete, kind, nameOf(obj), c.Delete(ctx, obj, opts...))
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			kind := f.kindOf(obj)
			if err := f.request(Delete, kind, "", true); err != nil {
				return err
			}
			return f.wrote(Delete, kind, "", c.DeleteAllOf(ctx, obj, opts...))
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			kind := f.kindOf(obj)
			if err := f.request(subVerb(sub), kind, nameOf(obj), true); err != nil {
				return err
			}
			return f.wrote(subVerb(sub), kind, nameOf(obj), c.SubResource(sub).Update(ctx, obj, opts...))
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			kind := f.kindOf(obj)
			if err := f.request(subVerb(sub), kind, nameOf(obj), true); err != nil {
				return err
			}
			return f.wrote(subVerb(sub), kind, nameOf(obj), c.SubResource(sub).Patch(ctx, obj, patch, opts...))
		},
	}
}

// apiReader is Fake's APIReader: reads past the cache.
type apiReader struct{ f *Fake }

func (r apiReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.f.request(APIGet, r.f.kindOf(obj), keyName(key), false); err != nil {
		return err
	}
	return r.f.read(ctx, key, obj, opts...)
}

func (r apiReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.f.request(APIList, r.f.kindOf(list), "", false); err != nil {
		return err
	}
	return r.f.list(ctx, list, opts...)
}

// read is a read of the API server, as a real one answers it.
func (f *Fake) read(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := f.base.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	return unclaimEmptyStatus(obj)
}

// list is a list of the API server, as a real one answers it.
func (f *Fake) list(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := f.base.List(ctx, list, opts...); err != nil {
		return err
	}
	return meta.EachListItem(list, func(item runtime.Object) error {
		obj, ok := item.(client.Object)
		if !ok {
			return fmt.Errorf("list item %T is no object", item)
		}
		return unclaimEmptyStatus(obj)
	})
}

// cached says whether the cache holds obj (read from the API server), as
// Cache makes it; without Cache, it holds everything.
func (f *Fake) cached(obj client.Object) (bool, error) {
	if f.Cache == nil {
		return true, nil
	}
	return f.Cache(obj)
}

// identify gives an applied object a UID, when the apply created it.
func (f *Fake) identify(ctx context.Context, obj runtime.ApplyConfiguration, kind string) error {
	v, ok := obj.(interface {
		GetAPIVersion() *string
		GetName() *string
		GetNamespace() *string
	})
	if !ok || v.GetAPIVersion() == nil || v.GetName() == nil {
		return nil
	}
	gv, err := schema.ParseGroupVersion(*v.GetAPIVersion())
	if err != nil {
		return err
	}
	typed, err := f.base.Scheme().New(gv.WithKind(kind))
	if err != nil {
		return nil // a kind the scheme does not know: left as the fake made it
	}
	stored, ok := typed.(client.Object)
	if !ok {
		return nil
	}
	key := client.ObjectKey{Name: *v.GetName()}
	if v.GetNamespace() != nil {
		key.Namespace = *v.GetNamespace()
	}
	if err := f.base.Get(ctx, key, stored); err != nil || stored.GetUID() != "" {
		return err
	}
	stored.SetUID(uidOf(kind, key.Name))
	return f.base.Update(ctx, stored)
}

func uidOf(kind, name string) types.UID {
	return types.UID("uid-" + strings.ToLower(kind) + "-" + name)
}

// unclaimEmptyStatus undoes a quirk of the fake client: an object created
// by an apply gets its status cleared inside the applied configuration, so
// the applier's managed fields claim an empty status, which a real API
// server's do not (and which a configuration extracted from them would
// then hold).
func unclaimEmptyStatus(obj client.Object) error {
	fields := obj.GetManagedFields()
	for i, m := range fields {
		if m.Operation != metav1.ManagedFieldsOperationApply || m.FieldsV1 == nil {
			continue
		}
		set := map[string]json.RawMessage{}
		if err := json.Unmarshal(m.FieldsV1.GetRawBytes(), &set); err != nil {
			return err
		}
		if string(set["f:status"]) != "{}" {
			continue
		}
		delete(set, "f:status")
		raw, err := json.Marshal(set)
		if err != nil {
			return err
		}
		fields[i].FieldsV1 = metav1.NewFieldsV1(string(raw))
	}
	return nil
}
