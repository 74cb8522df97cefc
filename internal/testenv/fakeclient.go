package testenv

import (
	"context"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
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
// are APIGet and APIList. Both read the same objects: the fake has no
// cache lag, so the two differ only in which failures a row injects.
type Fake struct {
	Client    client.WithWatch
	APIReader client.Reader

	base client.WithWatch

	mu     sync.Mutex
	fail   map[request]error
	writes []string
}

// request names what a failure applies to; an empty name is any object.
type request struct {
	verb       Verb
	kind, name string
}

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
// answer err, until Heal. A list has no name: fail it with Fail.
func (f *Fake) FailNamed(verb Verb, kind, name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[request{verb, kind, name}] = err
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

// Writes lists the writes that reached the API server, "<verb> <Kind>",
// in the order they came. A write that was made to fail is not among them.
func (f *Fake) Writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.writes...)
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

// ForgetWrites empties Writes, for a test that counts from here on.
func (f *Fake) ForgetWrites() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = nil
}

// request answers the failure injected for the request, if any, and
// records a write that passes.
func (f *Fake) request(verb Verb, kind, name string, write bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[request{verb, kind, name}]; err != nil {
		return err
	}
	if err := f.fail[request{verb, kind, ""}]; err != nil {
		return err
	}
	if write {
		f.writes = append(f.writes, string(verb)+" "+kind)
	}
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

// applied is the kind and name of an apply configuration (the generated
// ones carry both).
func applied(obj runtime.ApplyConfiguration) (kind, name string) {
	kind = "?"
	if k, ok := obj.(interface{ GetKind() *string }); ok && k.GetKind() != nil {
		kind = *k.GetKind()
	}
	if n, ok := obj.(interface{ GetName() *string }); ok && n.GetName() != nil {
		name = *n.GetName()
	}
	return kind, name
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
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := f.request(Get, f.kindOf(obj), key.Name, false); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := f.request(List, f.kindOf(list), "", false); err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := f.request(Create, f.kindOf(obj), obj.GetName(), true); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := f.request(Update, f.kindOf(obj), obj.GetName(), true); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := f.request(Patch, f.kindOf(obj), obj.GetName(), true); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			kind, name := applied(obj)
			if err := f.request(Apply, kind, name, true); err != nil {
				return err
			}
			return c.Apply(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := f.request(Delete, f.kindOf(obj), obj.GetName(), true); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			if err := f.request(Delete, f.kindOf(obj), "", true); err != nil {
				return err
			}
			return c.DeleteAllOf(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if err := f.request(subVerb(sub), f.kindOf(obj), obj.GetName(), true); err != nil {
				return err
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := f.request(subVerb(sub), f.kindOf(obj), obj.GetName(), true); err != nil {
				return err
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
}

// apiReader is Fake's APIReader: reads past the cache.
type apiReader struct{ f *Fake }

func (r apiReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.f.request(APIGet, r.f.kindOf(obj), key.Name, false); err != nil {
		return err
	}
	return r.f.base.Get(ctx, key, obj, opts...)
}

func (r apiReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.f.request(APIList, r.f.kindOf(list), "", false); err != nil {
		return err
	}
	return r.f.base.List(ctx, list, opts...)
}
