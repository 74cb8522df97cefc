package apierr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	secrets     = schema.GroupResource{Resource: "secrets"}
	conflict    = apierrors.NewConflict(secrets, "s", errors.New("the object has been modified"))
	invalid     = apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "s", field.ErrorList{field.Invalid(field.NewPath("data"), "x", "too long")})
	quota       = apierrors.NewForbidden(secrets, "s", errors.New("exceeded quota: count/secrets"))
	unavailable = apierrors.NewServiceUnavailable("etcd is down")
)

// terminating is what the API server answers a create in a namespace being deleted.
func terminating() error {
	err := apierrors.NewForbidden(secrets, "s", errors.New("unable to create new content in namespace team-a because it is being terminated"))
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace team-a is being terminated"}}
	return err
}

func TestClassify(t *testing.T) {
	cases := map[string]struct {
		err  error
		want Class
	}{
		"no error":                         {err: nil, want: None},
		"conflict":                         {err: conflict, want: Conflict},
		"conflict, wrapped":                {err: fmt.Errorf("adding finalizer: %w", conflict), want: Conflict},
		"invalid":                          {err: invalid, want: Refused},
		"forbidden by a quota or a policy": {err: quota, want: Refused},
		"forbidden, wrapped":               {err: fmt.Errorf("applying Secret s: %w", quota), want: Refused},
		"forbidden while the namespace is being deleted": {err: terminating(), want: Transient},
		"API server unavailable":                         {err: unavailable, want: Transient},
		"not found":                                      {err: apierrors.NewNotFound(secrets, "s"), want: Transient},
		"timeout":                                        {err: context.DeadlineExceeded, want: Transient},
		"not an API error":                               {err: errors.New("cache not synced"), want: Transient},
		"conflicts only":                                 {err: errors.Join(conflict, fmt.Errorf("w: %w", conflict)), want: Conflict},
		"a conflict beside a transient error":            {err: errors.Join(conflict, unavailable), want: Transient},
		"a conflict beside a refusal":                    {err: errors.Join(conflict, invalid), want: Refused},
		"several %w":                                     {err: fmt.Errorf("%w; %w", unavailable, conflict), want: Transient},
		"joined, then wrapped":                           {err: fmt.Errorf("step: %w", errors.Join(conflict, quota)), want: Refused},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(Classify(tc.err)).To(Equal(tc.want), "%v", tc.err)
		})
	}
}

func TestMessage(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Message(fmt.Errorf("applying Secret s: %w", quota))).To(Equal(`secrets "s" is forbidden: exceeded quota: count/secrets`),
		"the API server's own words, without the reconcile's context")
	g.Expect(Message(errors.New("plain"))).To(Equal("plain"))
}
