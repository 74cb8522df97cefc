package tenancy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/testenv"
)

func ingressRule(host string) networkingv1.IngressRule {
	return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
		Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: webBackend()}},
	}}}
}

func webBackend() networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}
}

// anIngress is an Ingress of class for hosts (no class when class is "").
func anIngress(ns, name, class string, hosts ...string) *networkingv1.Ingress {
	in := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if class != "" {
		in.Spec.IngressClassName = ptr.To(class)
	}
	for _, h := range hosts {
		in.Spec.Rules = append(in.Spec.Rules, ingressRule(h))
	}
	return in
}

func gatewayParent(namespace, name string) gatewayv1.ParentReference {
	ref := gatewayv1.ParentReference{Name: gatewayv1.ObjectName(name)}
	if namespace != "" {
		ref.Namespace = ptr.To(gatewayv1.Namespace(namespace))
	}
	return ref
}

func aRoute(name string, parents []gatewayv1.ParentReference, hostnames ...string) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: allowNS, Name: name}}
	r.Spec.ParentRefs = parents
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	return r
}

func aPod(name string, images ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: allowNS, Name: name}}
	for i, image := range images {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c" + string(rune('a'+i)), Image: image})
	}
	return p
}

// allowNS is the namespace of the Tenant with allowances.
const allowNS = "allow-a"

// aView is a MarkdownView (unstructured: this suite's scheme has no view
// types) with spec fields beside its one Markdown file.
func aView(name string, spec map[string]any) *unstructured.Unstructured {
	s := map[string]any{"markdowns": map[string]any{"a.md": "A"}}
	for k, v := range spec {
		s[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "view.trellis.dev/v1", "kind": "MarkdownView",
		"metadata": map[string]any{"namespace": allowNS, "name": name},
		"spec":     s,
	}}
}

// TestTenantAllowancesBindEveryoneInTheTenantsNamespaces: a Tenant's
// spec.allowances are written onto its namespaces as annotations, and
// config/admission's tenant-allowances policy holds Ingresses, HTTPRoutes,
// pods and MarkdownViews there to them: hostnames (exact, or a wildcard for
// one or more labels), ingress classes, Gateways and image registries. The
// tenant admin here holds every right over those kinds (RBAC is not what
// refuses them), and a cluster admin is bound as well. An UPDATE is checked
// for what it adds only, so an object that predates an allowance can still
// be changed otherwise; an allowance taken out of the spec comes off the
// namespaces and restricts nothing any more.
func TestTenantAllowancesBindEveryoneInTheTenantsNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("allow", "allow-", "a")
	tenant.Spec.Allowances = tenancyv1.TenantAllowances{
		Hostnames:      []tenancyv1.HostnamePattern{"*.team.example.com", "docs.example.com"},
		IngressClasses: []tenancyv1.ObjectName{"internal"},
		Gateways:       []tenancyv1.GatewayReference{{Namespace: "infra", Name: "shared"}},
		Registries:     []tenancyv1.RegistryPrefix{"registry.example.com/team", "docker.io/library"},
	}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "allow")
	const ns = allowNS
	g.Expect(getNamespace(g, ns).Annotations).To(And(
		HaveKeyWithValue(AllowedHostnamesAnnotation, "*.team.example.com,docs.example.com"),
		HaveKeyWithValue(AllowedIngressClassesAnnotation, "internal"),
		HaveKeyWithValue(AllowedGatewaysAnnotation, "infra/shared"),
		HaveKeyWithValue(AllowedRegistriesAnnotation, "registry.example.com/team,docker.io/library"),
	))

	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "allow-free"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-allowance-powers"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: []string{"*"}},
			{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"httproutes", "gateways"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "pods/ephemeralcontainers", "services"}, Verbs: []string{"*"}},
			{APIGroups: []string{"view.trellis.dev"}, Resources: []string{"markdownviews"}, Verbs: []string{"*"}},
		},
	})).To(Succeed())
	for _, n := range []string{ns, "allow-free"} {
		g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "test-allowance-powers"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-allowance-powers"},
			Subjects:   []rbacv1.Subject{{Kind: "Group", Name: "allow-admins", APIGroup: rbacv1.GroupName}},
		})).To(Succeed())
		// No kube-controller-manager makes the default ServiceAccount pods need.
		g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "default"}})).To(Succeed())
	}
	alice := clientAs(g, "alice", "allow-admins")

	const (
		hostnames = " is outside the Tenant allow's allowances.hostnames [*.team.example.com, docs.example.com]"
		classes   = " is outside the Tenant allow's allowances.ingressClasses [internal]"
		gateways  = " is outside the Tenant allow's allowances.gateways [infra/shared]"
		images    = ") is outside the Tenant allow's allowances.registries [registry.example.com/team, docker.io/library]"
		everyHost = "an Ingress rule or TLS entry without a host, or a defaultBackend, serves every hostname, which" + hostnames
	)
	shared := []gatewayv1.ParentReference{gatewayParent("infra", "shared")}
	// The API server loads a policy about a second after it is created.
	g.Eventually(func() error {
		return alice.Create(ctx, anIngress(ns, "probe", "internal", "login.example.com"), client.DryRunAll)
	}, timeout, interval).Should(MatchError(ContainSubstring("allowances.hostnames")))

	refused := map[string]struct {
		do   func() error
		want string
	}{
		"an Ingress for another hostname": {func() error {
			return alice.Create(ctx, anIngress(ns, "other", "internal", "login.example.com"))
		}, "hostname login.example.com" + hostnames},
		"an Ingress for the wildcard's own suffix": {func() error {
			return alice.Create(ctx, anIngress(ns, "suffix", "internal", "team.example.com"))
		}, "hostname team.example.com" + hostnames},
		"an Ingress for a broader wildcard": {func() error {
			return alice.Create(ctx, anIngress(ns, "broader", "internal", "*.example.com"))
		}, "hostname *.example.com" + hostnames},
		"an Ingress rule without a host": {func() error {
			return alice.Create(ctx, anIngress(ns, "no-host", "internal", ""))
		}, everyHost},
		"an Ingress default backend": {func() error {
			in := anIngress(ns, "default-backend", "internal")
			in.Spec.DefaultBackend = ptr.To(webBackend())
			return alice.Create(ctx, in)
		}, everyHost},
		"an Ingress TLS entry for another hostname": {func() error {
			in := anIngress(ns, "tls", "internal", "a.team.example.com")
			in.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"login.example.com"}, SecretName: "tls"}}
			return alice.Create(ctx, in)
		}, "hostname login.example.com" + hostnames},
		"an Ingress without a class": {func() error {
			return alice.Create(ctx, anIngress(ns, "no-class", "", "a.team.example.com"))
		}, "an Ingress without ingressClassName is served by the cluster default class, which" + classes},
		"an Ingress of another class": {func() error {
			return alice.Create(ctx, anIngress(ns, "public", "public", "a.team.example.com"))
		}, "ingress class public" + classes},
		"an Ingress asking external-dns to publish another hostname": {func() error {
			in := anIngress(ns, "external-dns", "internal", "a.team.example.com")
			in.Annotations = map[string]string{"external-dns.alpha.kubernetes.io/hostname": "a.team.example.com, login.example.com"}
			return alice.Create(ctx, in)
		}, "hostname login.example.com" + hostnames},
		"an Ingress asking ingress-nginx to serve another hostname as an alias": {func() error {
			in := anIngress(ns, "alias", "internal", "a.team.example.com")
			in.Annotations = map[string]string{"nginx.ingress.kubernetes.io/server-alias": "login.example.com"}
			return alice.Create(ctx, in)
		}, "hostname login.example.com" + hostnames},
		"a LoadBalancer Service asking external-dns to publish another hostname": {func() error {
			return alice.Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lb",
					Annotations: map[string]string{"external-dns.alpha.kubernetes.io/hostname": "login.example.com"}},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
			})
		}, "hostname login.example.com" + hostnames},
		"a LoadBalancer Service asking external-dns (its newer prefix, an internal hostname) to publish another hostname": {func() error {
			return alice.Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lb-internal",
					Annotations: map[string]string{"external-dns.kubernetes.io/internal-hostname": "a.team.example.com,login.example.com"}},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
			})
		}, "hostname login.example.com" + hostnames},
		"an Ingress asking external-dns (its newer prefix) to publish another hostname": {func() error {
			in := anIngress(ns, "external-dns-new", "internal", "a.team.example.com")
			in.Annotations = map[string]string{"external-dns.kubernetes.io/hostname": "login.example.com"}
			return alice.Create(ctx, in)
		}, "hostname login.example.com" + hostnames},
		"a Service asking external-dns (its old prefix) for another internal hostname": {func() error {
			return alice.Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "internal-alpha",
					Annotations: map[string]string{"external-dns.alpha.kubernetes.io/internal-hostname": "login.example.com"}},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
			})
		}, "hostname login.example.com" + hostnames},
		"a Gateway of its own with a listener for another hostname": {func() error {
			return alice.Create(ctx, aGateway("own", gatewayv1.Hostname("login.example.com")))
		}, "hostname login.example.com" + hostnames},
		"a Gateway of its own with a listener for every hostname": {func() error {
			return alice.Create(ctx, aGateway("every-host", ""))
		}, "a Gateway listener without a hostname takes every hostname, which" + hostnames},
		"an Ingress of a cluster admin for another hostname": {func() error {
			return k8s.Create(ctx, anIngress(ns, "admin", "internal", "login.example.com"))
		}, "hostname login.example.com" + hostnames},

		"an HTTPRoute for another hostname": {func() error {
			return alice.Create(ctx, aRoute("other", shared, "login.example.com"))
		}, "hostname login.example.com" + hostnames},
		"an HTTPRoute without hostnames": {func() error {
			return alice.Create(ctx, aRoute("every-host", shared))
		}, "an HTTPRoute without hostnames takes every hostname of its Gateway, which" + hostnames},
		"an HTTPRoute on another Gateway": {func() error {
			return alice.Create(ctx, aRoute("public", []gatewayv1.ParentReference{gatewayParent("infra", "public")}, "a.team.example.com"))
		}, "parent infra/public" + gateways},
		"an HTTPRoute on a Gateway of its own namespace": {func() error {
			return alice.Create(ctx, aRoute("own", []gatewayv1.ParentReference{gatewayParent("", "shared")}, "a.team.example.com"))
		}, "parent allow-a/shared" + gateways},
		"an HTTPRoute on a parent of another kind": {func() error {
			ref := gatewayParent("infra", "shared")
			ref.Kind = ptr.To(gatewayv1.Kind("ListenerSet"))
			return alice.Create(ctx, aRoute("listeners", []gatewayv1.ParentReference{ref}, "a.team.example.com"))
		}, "parent ListenerSet.gateway.networking.k8s.io infra/shared" + gateways},

		"a pod of another Docker Hub account": {func() error {
			return alice.Create(ctx, aPod("hub", "evil/nginx"))
		}, "image evil/nginx (repository docker.io/evil/nginx" + images},
		"a pod from a path beside the allowed one": {func() error {
			return alice.Create(ctx, aPod("beside", "registry.example.com/team-evil/app:1"))
		}, "image registry.example.com/team-evil/app:1 (repository registry.example.com/team-evil/app" + images},
		"a pod from a registry named like the allowed one": {func() error {
			return alice.Create(ctx, aPod("lookalike", "registry.example.com.evil.io/team/app"))
		}, "(repository registry.example.com.evil.io/team/app" + images},
		"a pod from another port of the allowed host": {func() error {
			return alice.Create(ctx, aPod("port", "registry.example.com:5000/team/app"))
		}, "(repository registry.example.com:5000/team/app" + images},
		"a pod whose upper-case first component the runtime reads as a host": {func() error {
			return alice.Create(ctx, aPod("upper", "EVILHOST/library/nginx:1"))
		}, "(repository EVILHOST/library/nginx" + images},
		"a pod naming an image ID, which runs whatever the node holds": {func() error {
			return alice.Create(ctx, aPod("image-id", "sha256:"+strings.Repeat("c", 64)))
		}, "(repository (an image ID, which names no registry)" + images},
		"a pod with an init container from elsewhere": {func() error {
			p := aPod("init", "nginx")
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "quay.io/x/y:1"}}
			return alice.Create(ctx, p)
		}, "image quay.io/x/y:1 (repository quay.io/x/y" + images},

		"a MarkdownView's Ingress for another hostname": {func() error {
			return alice.Create(ctx, aView("other", map[string]any{
				"expose": map[string]any{"ingress": map[string]any{"host": "login.example.com", "ingressClassName": "internal"}},
			}))
		}, "hostname login.example.com" + hostnames},
		"a MarkdownView's Ingress without a class": {func() error {
			return alice.Create(ctx, aView("no-class", map[string]any{
				"expose": map[string]any{"ingress": map[string]any{"host": "a.team.example.com"}},
			}))
		}, "an Ingress without ingressClassName is served by the cluster default class, which" + classes},
		"a MarkdownView's HTTPRoute on another Gateway": {func() error {
			return alice.Create(ctx, aView("public", map[string]any{
				"expose": map[string]any{"httpRoute": map[string]any{
					"parentRefs": []any{map[string]any{"namespace": "infra", "name": "public"}},
					"hostnames":  []any{"a.team.example.com"},
				}},
			}))
		}, "parent infra/public" + gateways},
		"a MarkdownView's viewer image from elsewhere": {func() error {
			return alice.Create(ctx, aView("image", map[string]any{"viewerImage": "quay.io/x/viewer:1"}))
		}, "image quay.io/x/viewer:1 (repository quay.io/x/viewer" + images},
	}
	for name, tc := range refused {
		t.Run("refused: "+name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.do()
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}

	admitted := map[string]func() error{
		"an Ingress within the allowances": func() error {
			in := anIngress(ns, "within", "internal", "a.team.example.com", "a.b.team.example.com", "docs.example.com", "*.x.team.example.com")
			in.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"a.team.example.com"}, SecretName: "tls"}}
			return alice.Create(ctx, in)
		},
		"an HTTPRoute within the allowances": func() error {
			return alice.Create(ctx, aRoute("within", shared, "a.team.example.com", "*.team.example.com", "docs.example.com"))
		},
		"an HTTPRoute on a Service (mesh routing) beside the Gateway": func() error {
			svc := gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")), Name: "web"}
			return alice.Create(ctx, aRoute("mesh", append([]gatewayv1.ParentReference{svc}, shared...), "a.team.example.com"))
		},
		"pods of Docker Hub's library and of the allowed path": func() error {
			return alice.Create(ctx, aPod("within", "nginx", "nginx:1.27", "docker.io/nginx",
				"docker.io/library/nginx@sha256:"+strings.Repeat("a", 64), "registry.example.com/team/app:1.2",
				"registry.example.com/team/sub/app:1@sha256:"+strings.Repeat("b", 64), "registry.example.com/team"))
		},
		"a MarkdownView within the allowances": func() error {
			return alice.Create(ctx, aView("within", map[string]any{
				"viewerImage": "registry.example.com/team/viewer:1",
				"expose": map[string]any{"httpRoute": map[string]any{
					"parentRefs": []any{map[string]any{"namespace": "infra", "name": "shared"}},
					"hostnames":  []any{"docs.example.com"},
				}},
			}))
		},
		"a Gateway of its own with a listener within the allowances": func() error {
			return alice.Create(ctx, aGateway("within", gatewayv1.Hostname("a.team.example.com")))
		},
		"an Ingress whose annotations name hostnames within the allowances": func() error {
			in := anIngress(ns, "annotated", "internal", "a.team.example.com")
			in.Annotations = map[string]string{
				"external-dns.alpha.kubernetes.io/hostname": "a.team.example.com,docs.example.com",
				"nginx.ingress.kubernetes.io/server-alias":  "b.team.example.com",
			}
			return alice.Create(ctx, in)
		},
		"anything in a namespace no Tenant holds": func() error {
			return alice.Create(ctx, anIngress("allow-free", "anything", "", "login.example.com"))
		},
	}
	for name, do := range admitted {
		t.Run("admitted: "+name, func(t *testing.T) {
			NewWithT(t).Expect(do()).To(Succeed())
		})
	}

	t.Run("a pod's images are checked when they change and when an ephemeral container is added", func(t *testing.T) {
		g := NewWithT(t)
		p := &corev1.Pod{}
		g.Expect(alice.Get(ctx, client.ObjectKey{Namespace: ns, Name: "within"}, p)).To(Succeed())
		p.Spec.Containers[0].Image = "quay.io/x/y:1"
		err := alice.Update(ctx, p)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("image quay.io/x/y:1 (repository quay.io/x/y" + images))

		g.Expect(alice.Get(ctx, client.ObjectKey{Namespace: ns, Name: "within"}, p)).To(Succeed())
		debug := p.DeepCopy()
		debug.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Image: "quay.io/debug/busybox:1", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent,
		}}}
		err = alice.SubResource("ephemeralcontainers").Update(ctx, debug)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("image quay.io/debug/busybox:1 (repository quay.io/debug/busybox" + images))

		debug.Spec.EphemeralContainers[0].Image = "registry.example.com/team/debug:1"
		g.Expect(alice.SubResource("ephemeralcontainers").Update(ctx, debug)).To(Succeed())
	})

	setHostnames := func(g Gomega, hosts []tenancyv1.HostnamePattern, annotation string) {
		g.Eventually(func() error {
			t := getTenant(g, "allow")
			t.Spec.Allowances.Hostnames = hosts
			return k8s.Update(ctx, t)
		}, timeout, interval).Should(Succeed())
		g.Eventually(func() string {
			return getNamespace(g, ns).Annotations[AllowedHostnamesAnnotation]
		}, timeout, interval).Should(Equal(annotation))
	}
	t.Run("an object that predates an allowance can still be changed, but gains nothing outside it", func(t *testing.T) {
		g := NewWithT(t)
		setHostnames(g, append(tenant.Spec.Allowances.Hostnames, "legacy.example.com"), "*.team.example.com,docs.example.com,legacy.example.com")
		g.Eventually(func() error {
			return alice.Create(ctx, anIngress(ns, "legacy", "internal", "legacy.example.com"))
		}, timeout, interval).Should(Succeed())
		setHostnames(g, tenant.Spec.Allowances.Hostnames, "*.team.example.com,docs.example.com")

		g.Eventually(func() error {
			in := &networkingv1.Ingress{}
			if err := alice.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, in); err != nil {
				return err
			}
			in.Labels = map[string]string{"edited": "yes"}
			in.Spec.Rules = append(in.Spec.Rules, ingressRule("b.team.example.com"))
			return alice.Update(ctx, in)
		}, timeout, interval).Should(Succeed())
		in := &networkingv1.Ingress{}
		g.Expect(alice.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, in)).To(Succeed())
		in.Spec.Rules = append(in.Spec.Rules, ingressRule("legacy2.example.com"))
		err := alice.Update(ctx, in)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("hostname legacy2.example.com" + hostnames))
	})

	t.Run("an allowance taken out of the spec comes off the namespace and restricts nothing", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func() error {
			t := getTenant(g, "allow")
			t.Spec.Allowances.Hostnames = nil
			return k8s.Update(ctx, t)
		}, timeout, interval).Should(Succeed())
		g.Eventually(func() map[string]string { return getNamespace(g, ns).Annotations }, timeout, interval).
			ShouldNot(HaveKey(AllowedHostnamesAnnotation))
		g.Expect(getNamespace(g, ns).Annotations).To(HaveKey(AllowedRegistriesAnnotation), "the others stay")
		g.Eventually(func() error {
			return alice.Create(ctx, anIngress(ns, "anywhere", "internal", "login.example.com"))
		}, timeout, interval).Should(Succeed())
	})

	t.Run("a namespace the Tenant releases keeps its allowances, still enforced", func(t *testing.T) {
		g := NewWithT(t)
		deleteTenant(g, "allow") // namespaceDeletionPolicy Retain: allow-a is released
		released := getNamespace(g, ns)
		g.Expect(released.Labels).To(HaveKeyWithValue(ReleasedFromLabel, "allow"))
		g.Expect(released.Labels).NotTo(HaveKey(TenantLabel))
		g.Expect(released.Annotations).To(HaveKeyWithValue(AllowedRegistriesAnnotation, "registry.example.com/team,docker.io/library"))
		// alice's own binding (not Trellis') is a credential the team kept.
		err := alice.Create(ctx, aPod("after-release", "quay.io/x/y:1"))
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("image quay.io/x/y:1 (repository quay.io/x/y" + images))
		g.Expect(alice.Create(ctx, aPod("after-release", "registry.example.com/team/app:1"))).To(Succeed())
	})
}

// TestSampleTenantIsAccepted: config/samples' Tenant, allowances included,
// passes the schema `make dev` applies it under, and its allowances are what
// the annotations will say.
func TestSampleTenantIsAccepted(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "tenancy_v1_tenant.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	sample := &tenancyv1.Tenant{}
	g.Expect(yaml.UnmarshalStrict(raw, sample)).To(Succeed())
	g.Expect(sample.Spec.Allowances.Registries).To(ContainElement(tenancyv1.RegistryPrefix("docker.io/library")),
		"the dev viewer image trellis-viewer:dev is docker.io/library/trellis-viewer")
	g.Expect(k8s.Create(context.Background(), sample, client.DryRunAll)).To(Succeed())
	g.Expect(allowanceAnnotations(sample.Spec.Allowances)).To(HaveKeyWithValue(AllowedHostnamesAnnotation, "*.team-a.example.com"))
}

// aGateway is a Gateway in the tenant's namespace with one HTTP listener for
// hostname ("" for none: every hostname).
func aGateway(name string, hostname gatewayv1.Hostname) *gatewayv1.Gateway {
	l := gatewayv1.Listener{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}
	if hostname != "" {
		l.Hostname = &hostname
	}
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: allowNS, Name: name},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: "shared", Listeners: []gatewayv1.Listener{l}},
	}
}
