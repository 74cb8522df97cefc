package tenancy

import (
	"context"
	"reflect"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
)

// The classes a tenant's claims and pods name, and its Services' types,
// against a Tenant's allowances.storageClasses, priorityClasses,
// runtimeClasses and serviceTypes.

// outsidePriorityClass is a PriorityClass outside classesAllowances.
const outsidePriorityClass = "team-high"

// classesAllowances are the allowances of the tenants below: one class of
// each kind (and ClusterIP Services) allowed; fast, team-high and kata are
// outside them.
var classesAllowances = tenancyv1.TenantAllowances{
	StorageClasses:  []tenancyv1.ObjectName{"standard"},
	PriorityClasses: []tenancyv1.ObjectName{"team-low"},
	RuntimeClasses:  []tenancyv1.ObjectName{"gvisor"},
	ServiceTypes:    []tenancyv1.ServiceType{tenancyv1.ServiceType(corev1.ServiceTypeClusterIP)},
	NodeSelector:    map[string]tenancyv1.LabelValue{"pool": "team"},
}

// The refusals' messages, after what they name, in tenant's namespaces.
func outsideStorageClasses(tenant string) string {
	return " is outside the Tenant " + tenant + "'s allowances.storageClasses [standard]: name one of them in storageClassName"
}

func outsidePriorityClasses(tenant string) string {
	return " is outside the Tenant " + tenant + "'s allowances.priorityClasses [team-low]"
}

func outsideRuntimeClasses(tenant string) string {
	return " is outside the Tenant " + tenant + "'s allowances.runtimeClasses [gvisor]"
}

// outsideServiceTypes is the refusal of a Service's type in clsops' namespace.
const outsideServiceTypes = " is outside the Tenant clsops's allowances.serviceTypes [ClusterIP]"

// makeClasses makes the PriorityClasses and RuntimeClasses the tests' pods
// name (the API server's Priority and RuntimeClass admission refuse a pod
// that names one that does not exist, before any policy sees it).
func makeClasses(g Gomega) {
	ctx := context.Background()
	for _, name := range []string{"team-low", outsidePriorityClass} {
		err := k8s.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 10})
		if !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred())
		}
	}
	for _, name := range []string{"gvisor", "kata"} {
		err := k8s.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: name})
		if !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred())
		}
	}
}

// classesTenant makes a Tenant of one namespace, <name>-a, with allowances
// (none when zero), and returns the namespace and a client for its admin
// alice, who holds there what the built-in admin role holds on a real
// cluster (bindBuiltinAdminRules).
func classesTenant(g Gomega, name string, allowances tenancyv1.TenantAllowances) (string, client.Client) {
	ctx := context.Background()
	makeClasses(g)
	tenant := newTenant(name, name+"-", "a")
	tenant.Spec.Allowances = allowances
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, name)
	ns := name + "-a"
	// No kube-controller-manager makes the default ServiceAccount pods need.
	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})).To(Succeed())
	bindBuiltinAdminRules(g, ns)
	return ns, clientAs(g, "alice", name+"-admins")
}

// setClassesAllowances sets classesAllowances on the Tenant and waits until
// the API server refuses what they refuse (the namespace's annotations and
// the policy are each seen a moment after they are written).
func setClassesAllowances(g Gomega, name, ns string, alice client.Client) {
	ctx := context.Background()
	g.Eventually(func() error {
		tenant := getTenant(g, name)
		tenant.Spec.Allowances = classesAllowances
		return k8s.Update(ctx, tenant)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() map[string]string { return getNamespace(g, ns).Annotations }, timeout, interval).Should(And(
		HaveKeyWithValue(AllowedStorageClassesAnnotation, "standard"),
		HaveKeyWithValue(AllowedPriorityClassesAnnotation, "team-low"),
		HaveKeyWithValue(AllowedRuntimeClassesAnnotation, "gvisor"),
		HaveKeyWithValue(AllowedServiceTypesAnnotation, "ClusterIP"),
		HaveKeyWithValue(ForcedNodeSelectorAnnotation, "pool=team"),
	))
	g.Eventually(func() error {
		return alice.Create(ctx, aClaim(ns, "probe", ptr.To("fast")), client.DryRunAll)
	}, timeout, interval).Should(MatchError(ContainSubstring("allowances.storageClasses")))
	g.Eventually(func() error {
		return alice.Create(ctx, aService(ns, "probe", corev1.ServiceTypeNodePort), client.DryRunAll)
	}, timeout, interval).Should(MatchError(ContainSubstring("allowances.serviceTypes")))
}

// aClaim is a PersistentVolumeClaim of class (none when nil).
func aClaim(ns, name string, class *string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// aService is a Service of type with one port.
func aService(ns, name string, typ corev1.ServiceType) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if typ == corev1.ServiceTypeExternalName {
		s.Spec.ExternalName = "db.example.com"
		s.Spec.Ports = nil
	}
	return s
}

// classPod is restrictedPod with an allowed image, on the nodes
// classesAllowances force.
func classPod(ns, name string) *corev1.Pod {
	p := restrictedPod(ns, name, false)
	p.Spec.Containers = []corev1.Container{restrictedContainer("app", insideImage)}
	p.Spec.NodeSelector = map[string]string{"pool": "team"}
	return p
}

// forcedNodeSelector is the refusal of a pod without pool=team in clsops' namespace.
const forcedNodeSelector = "spec.nodeSelector lacks pool=team, which the Tenant clsops's allowances.nodeSelector [pool=team] forces: add pool=team to it"

// withEphemeralVolume adds a generic ephemeral volume whose claim is of
// class (none when nil).
func withEphemeralVolume(p *corev1.Pod, class *string) *corev1.Pod {
	claim := aClaim("", "", class)
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{
		Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: claim.Spec}},
	}})
	return p
}

// classWords are the words of the fields a pod names a class in that the
// allowances restrict.
var classWords = []string{"storageclass", "priorityclass", "runtimeclass"}

// TestEveryPodFieldThatNamesAClassIsRead is TestEveryPodFieldThatNamesAnImageIsRead
// for classes: it walks corev1.PodSpec for every string field whose path
// names a StorageClass, PriorityClass or RuntimeClass, fails on one the
// tenant-allowances policy does not read (classReaders), and, for each one
// read, has a tenant admin refused a pod with a class outside the
// allowances there, with the allowance's message, and admitted with the
// allowed class. (A PersistentVolumeClaim made by the ephemeral volume
// controller, or by the StatefulSet controller from volumeClaimTemplates,
// is a claim like any other: TestTenantClassAllowancesOperationByOperation.)
func TestEveryPodFieldThatNamesAClassIsRead(t *testing.T) {
	classReaders := map[string]struct {
		put              func(p *corev1.Pod, class string)
		outside, allowed string
		refusal          string
	}{
		"spec.priorityClassName": {
			put:     func(p *corev1.Pod, class string) { p.Spec.PriorityClassName = class },
			outside: outsidePriorityClass, allowed: "team-low", refusal: "priority class " + outsidePriorityClass + outsidePriorityClasses("cls"),
		},
		"spec.runtimeClassName": {
			put:     func(p *corev1.Pod, class string) { p.Spec.RuntimeClassName = ptr.To(class) },
			outside: "kata", allowed: "gvisor", refusal: "runtime class kata" + outsideRuntimeClasses("cls"),
		},
		"spec.volumes[].ephemeral.volumeClaimTemplate.spec.storageClassName": {
			put:     func(p *corev1.Pod, class string) { withEphemeralVolume(p, ptr.To(class)) },
			outside: "fast", allowed: "standard", refusal: "storage class fast" + outsideStorageClasses("cls"),
		},
	}

	t.Run("the walk finds no field the policy does not read", func(t *testing.T) {
		g := NewWithT(t)
		found := fieldPathsNaming(reflect.TypeFor[corev1.PodSpec](), classWords)
		for _, path := range found {
			_, read := classReaders[path]
			g.Expect(read).To(BeTrue(),
				"%s names a class: make config/admission/tenant_allowances.yaml read it and add it to classReaders", path)
		}
		for path := range classReaders {
			g.Expect(found).To(ContainElement(path), "classReaders lists %s, which corev1.PodSpec no longer has", path)
		}
	})

	g := NewWithT(t)
	ctx := context.Background()
	ns, alice := classesTenant(g, "cls", tenancyv1.TenantAllowances{})
	setClassesAllowances(g, "cls", ns, alice)

	n := 0
	for path, reader := range classReaders {
		t.Run(path, func(t *testing.T) {
			for _, class := range []string{reader.outside, reader.allowed} {
				g := NewWithT(t)
				n++
				pod := classPod(ns, "walk-"+strconv.Itoa(n))
				reader.put(pod, class)
				err := alice.Create(ctx, pod)
				if class == reader.allowed {
					g.Expect(err).NotTo(HaveOccurred(), "%s at %s", class, path)
					continue
				}
				g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s at %s: got %v", class, path, err)
				g.Expect(err.Error()).To(ContainSubstring(reader.refusal))
				g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))).To(BeTrue())
			}
		})
	}
}

// TestTenantClassAllowancesOperationByOperation: the tenant-allowances
// policy's storageClasses, priorityClasses, runtimeClasses, serviceTypes
// and nodeSelector, for the CREATE and UPDATE of each field by a tenant admin
// (the built-in admin role's rules, impersonated) and by a cluster admin
// (the allowances bind everyone, as they bind the controllers that make
// claims from StatefulSets' volumeClaimTemplates and pods from
// Deployments). Objects outside the allowances are made before they are set
// ("legacy"): an UPDATE is checked for what it adds only, so they can still
// be relabelled, and gain nothing outside them; an allowance left unset
// restricts nothing.
func TestTenantClassAllowancesOperationByOperation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, alice := classesTenant(g, "clsops", tenancyv1.TenantAllowances{})
	const tenant = "clsops"

	// Before the allowances, anything goes.
	legacyPod := classPod(ns, "legacy-pod")
	legacyPod.Spec.PriorityClassName = outsidePriorityClass
	legacyPod.Spec.RuntimeClassName = ptr.To("kata")
	legacyPod.Spec.NodeSelector = nil
	withEphemeralVolume(legacyPod, ptr.To("fast"))
	g.Eventually(func() error { return alice.Create(ctx, legacyPod) }, timeout, interval).Should(Succeed())
	g.Expect(alice.Create(ctx, aClaim(ns, "legacy-unset", nil))).To(Succeed())
	g.Expect(alice.Create(ctx, aClaim(ns, "legacy-unset-2", nil))).To(Succeed())
	g.Expect(alice.Create(ctx, aClaim(ns, "legacy-fast", ptr.To("fast")))).To(Succeed())
	g.Expect(alice.Create(ctx, aService(ns, "legacy-nodeport", corev1.ServiceTypeNodePort))).To(Succeed())
	g.Expect(alice.Create(ctx, aService(ns, "to-nodeport", corev1.ServiceTypeClusterIP))).To(Succeed())
	g.Expect(alice.Create(ctx, aService(ns, "to-lb", corev1.ServiceTypeClusterIP))).To(Succeed())
	g.Expect(alice.Create(ctx, aService(ns, "to-externalname", corev1.ServiceTypeClusterIP))).To(Succeed())

	setClassesAllowances(g, tenant, ns, alice)

	updateClaim := func(name string, change func(*corev1.PersistentVolumeClaim)) error {
		c := &corev1.PersistentVolumeClaim{}
		if err := alice.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		change(c)
		return alice.Update(ctx, c)
	}
	updatePod := func(name string, change func(*corev1.Pod)) error {
		p := &corev1.Pod{}
		if err := alice.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		change(p)
		return alice.Update(ctx, p)
	}
	updateService := func(name string, change func(*corev1.Service)) error {
		s := &corev1.Service{}
		if err := alice.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return err
		}
		change(s)
		return alice.Update(ctx, s)
	}
	claimClass := func(name string) *string {
		c := &corev1.PersistentVolumeClaim{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
		return c.Spec.StorageClassName
	}
	serviceType := func(name string) corev1.ServiceType {
		s := &corev1.Service{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
		return s.Spec.Type
	}
	absent := func(obj client.Object) func(Gomega) {
		return func(g Gomega) {
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj))).To(BeTrue())
		}
	}
	nothing := func(Gomega) {}
	const (
		byAllowance = iota
		byValidation
		admitted
	)
	unsetClass := "a PersistentVolumeClaim without a storageClassName (or with an empty one) takes the cluster default class or a volume of no class, which" +
		outsideStorageClasses(tenant)
	rows := []struct {
		operation string
		do        func() error
		verdict   int
		want      string // in the refusal
		after     func(Gomega)
	}{
		// storageClasses: claims.
		{"CREATE a claim of another class", func() error { return alice.Create(ctx, aClaim(ns, "fast", ptr.To("fast"))) },
			byAllowance, "storage class fast" + outsideStorageClasses(tenant), absent(aClaim(ns, "fast", nil))},
		{"CREATE a claim without a class (the cluster default)", func() error { return alice.Create(ctx, aClaim(ns, "unset", nil)) },
			byAllowance, unsetClass, absent(aClaim(ns, "unset", nil))},
		{"CREATE a claim of the empty class (a volume of no class)", func() error { return alice.Create(ctx, aClaim(ns, "empty", ptr.To(""))) },
			byAllowance, unsetClass, absent(aClaim(ns, "empty", nil))},
		{"CREATE a claim of another class, as a cluster admin (or the StatefulSet controller)", func() error {
			return k8s.Create(ctx, aClaim(ns, "admin-fast", ptr.To("fast")))
		}, byAllowance, "storage class fast" + outsideStorageClasses(tenant), absent(aClaim(ns, "admin-fast", nil))},
		{"CREATE a claim of the allowed class", func() error { return alice.Create(ctx, aClaim(ns, "standard", ptr.To("standard"))) },
			admitted, "", func(g Gomega) { g.Expect(claimClass("standard")).To(HaveValue(Equal("standard"))) }},
		{"UPDATE a legacy claim's labels", func() error {
			return updateClaim("legacy-fast", func(c *corev1.PersistentVolumeClaim) { c.Labels = map[string]string{"app": "db"} })
		}, admitted, "", func(g Gomega) { g.Expect(claimClass("legacy-fast")).To(HaveValue(Equal("fast"))) }},
		{"UPDATE a claim without a class to another class", func() error {
			return updateClaim("legacy-unset", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("fast") })
		}, byAllowance, "storage class fast" + outsideStorageClasses(tenant), func(g Gomega) { g.Expect(claimClass("legacy-unset")).To(BeNil()) }},
		{"UPDATE a claim without a class to the allowed class", func() error {
			return updateClaim("legacy-unset-2", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("standard") })
		}, admitted, "", func(g Gomega) { g.Expect(claimClass("legacy-unset-2")).To(HaveValue(Equal("standard"))) }},
		{"UPDATE a claim's class (the API server keeps it)", func() error {
			return updateClaim("legacy-fast", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("standard") })
		}, byValidation, "spec is immutable", func(g Gomega) { g.Expect(claimClass("legacy-fast")).To(HaveValue(Equal("fast"))) }},

		// storageClasses, priorityClasses, runtimeClasses: pods.
		{"CREATE a pod with an ephemeral volume without a class", func() error {
			return alice.Create(ctx, withEphemeralVolume(classPod(ns, "scratch-unset"), nil))
		}, byAllowance, "an ephemeral volume's claim template without a storageClassName", absent(classPod(ns, "scratch-unset"))},
		{"CREATE a pod of another PriorityClass, as a cluster admin (or the ReplicaSet controller)", func() error {
			p := classPod(ns, "admin-high")
			p.Spec.PriorityClassName = outsidePriorityClass
			return k8s.Create(ctx, p)
		}, byAllowance, "priority class " + outsidePriorityClass + outsidePriorityClasses(tenant), absent(classPod(ns, "admin-high"))},
		{"CREATE a pod of no PriorityClass or RuntimeClass", func() error {
			return alice.Create(ctx, classPod(ns, "plain"))
		}, admitted, "", nothing},
		{"UPDATE a legacy pod's labels", func() error {
			return updatePod("legacy-pod", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} })
		}, admitted, "", nothing},
		{"UPDATE a pod's PriorityClass (the API server keeps it)", func() error {
			return updatePod("plain", func(p *corev1.Pod) { p.Spec.PriorityClassName = outsidePriorityClass })
		}, byValidation, "pod updates may not change fields other than", nothing},
		{"UPDATE a pod's RuntimeClass (the API server keeps it)", func() error {
			return updatePod("plain", func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("kata") })
		}, byValidation, "pod updates may not change fields other than", nothing},

		// nodeSelector.
		{"CREATE a pod without the forced node label", func() error {
			p := classPod(ns, "anywhere")
			p.Spec.NodeSelector = nil
			return alice.Create(ctx, p)
		}, byAllowance, forcedNodeSelector, absent(classPod(ns, "anywhere"))},
		{"CREATE a pod selecting another value of the forced node label", func() error {
			p := classPod(ns, "other-pool")
			p.Spec.NodeSelector = map[string]string{"pool": "shared"}
			return alice.Create(ctx, p)
		}, byAllowance, forcedNodeSelector, absent(classPod(ns, "other-pool"))},
		{"CREATE a pod with the forced node label and more", func() error {
			p := classPod(ns, "pool-and-zone")
			p.Spec.NodeSelector["zone"] = "a"
			return alice.Create(ctx, p)
		}, admitted, "", nothing},
		{"CREATE a MarkdownView whose pod lacks the forced node label, as a cluster admin", func() error {
			v := aView("anywhere", nil)
			v.SetNamespace(ns)
			return k8s.Create(ctx, v, client.DryRunAll)
		}, byAllowance, "spec.pod.nodeSelector lacks pool=team", nothing},
		{"CREATE a MarkdownView whose pod selects the forced node label", func() error {
			v := aView("pooled", map[string]any{"pod": map[string]any{"nodeSelector": map[string]any{"pool": "team"}}})
			v.SetNamespace(ns)
			return k8s.Create(ctx, v, client.DryRunAll)
		}, admitted, "", nothing},
		{"UPDATE a pod's nodeSelector (the API server keeps it)", func() error {
			return updatePod("plain", func(p *corev1.Pod) { p.Spec.NodeSelector = nil })
		}, byValidation, "pod updates may not change fields other than", nothing},

		// serviceTypes.
		{"CREATE a NodePort Service", func() error { return alice.Create(ctx, aService(ns, "np", corev1.ServiceTypeNodePort)) },
			byAllowance, "Service type NodePort" + outsideServiceTypes, absent(aService(ns, "np", ""))},
		{"CREATE a LoadBalancer Service", func() error { return alice.Create(ctx, aService(ns, "lb", corev1.ServiceTypeLoadBalancer)) },
			byAllowance, "Service type LoadBalancer" + outsideServiceTypes, absent(aService(ns, "lb", ""))},
		{"CREATE an ExternalName Service", func() error { return alice.Create(ctx, aService(ns, "en", corev1.ServiceTypeExternalName)) },
			byAllowance, "Service type ExternalName" + outsideServiceTypes, absent(aService(ns, "en", ""))},
		{"CREATE a LoadBalancer Service, as a cluster admin", func() error {
			return k8s.Create(ctx, aService(ns, "admin-lb", corev1.ServiceTypeLoadBalancer))
		}, byAllowance, "Service type LoadBalancer" + outsideServiceTypes, absent(aService(ns, "admin-lb", ""))},
		{"CREATE a ClusterIP Service", func() error { return alice.Create(ctx, aService(ns, "cip", corev1.ServiceTypeClusterIP)) },
			admitted, "", func(g Gomega) { g.Expect(serviceType("cip")).To(Equal(corev1.ServiceTypeClusterIP)) }},
		{"CREATE a Service without a type (ClusterIP)", func() error { return alice.Create(ctx, aService(ns, "untyped", "")) },
			admitted, "", func(g Gomega) { g.Expect(serviceType("untyped")).To(Equal(corev1.ServiceTypeClusterIP)) }},
		{"UPDATE a ClusterIP Service to NodePort", func() error {
			return updateService("to-nodeport", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
		}, byAllowance, "Service type NodePort" + outsideServiceTypes,
			func(g Gomega) { g.Expect(serviceType("to-nodeport")).To(Equal(corev1.ServiceTypeClusterIP)) }},
		{"UPDATE a ClusterIP Service to LoadBalancer", func() error {
			return updateService("to-lb", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer })
		}, byAllowance, "Service type LoadBalancer" + outsideServiceTypes,
			func(g Gomega) { g.Expect(serviceType("to-lb")).To(Equal(corev1.ServiceTypeClusterIP)) }},
		{"UPDATE a ClusterIP Service to ExternalName", func() error {
			return updateService("to-externalname", func(s *corev1.Service) {
				s.Spec.Type, s.Spec.ExternalName, s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.Ports = corev1.ServiceTypeExternalName, "db.example.com", "", nil, nil
			})
		}, byAllowance, "Service type ExternalName" + outsideServiceTypes,
			func(g Gomega) { g.Expect(serviceType("to-externalname")).To(Equal(corev1.ServiceTypeClusterIP)) }},
		{"UPDATE a legacy NodePort Service's labels", func() error {
			return updateService("legacy-nodeport", func(s *corev1.Service) { s.Labels = map[string]string{"app": "web"} })
		}, admitted, "", func(g Gomega) { g.Expect(serviceType("legacy-nodeport")).To(Equal(corev1.ServiceTypeNodePort)) }},
		{"UPDATE a legacy NodePort Service to LoadBalancer", func() error {
			return updateService("legacy-nodeport", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer })
		}, byAllowance, "Service type LoadBalancer" + outsideServiceTypes,
			func(g Gomega) { g.Expect(serviceType("legacy-nodeport")).To(Equal(corev1.ServiceTypeNodePort)) }},
	}
	for _, row := range rows {
		t.Run(row.operation, func(t *testing.T) {
			g := NewWithT(t)
			err := row.do()
			switch row.verdict {
			case admitted:
				g.Expect(err).NotTo(HaveOccurred())
			case byAllowance:
				g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
				g.Expect(err.Error()).To(ContainSubstring("ValidatingAdmissionPolicy 'tenant-allowances'"))
				g.Expect(err.Error()).To(ContainSubstring(row.want))
			case byValidation:
				g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
				g.Expect(err.Error()).To(ContainSubstring(row.want))
			}
			row.after(g)
		})
	}

	t.Run("allowances taken out of the spec come off the namespace and restrict nothing", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func() error {
			tenant := getTenant(g, tenant)
			tenant.Spec.Allowances = tenancyv1.TenantAllowances{}
			return k8s.Update(ctx, tenant)
		}, timeout, interval).Should(Succeed())
		g.Eventually(func() map[string]string { return getNamespace(g, ns).Annotations }, timeout, interval).Should(And(
			Not(HaveKey(AllowedStorageClassesAnnotation)), Not(HaveKey(AllowedPriorityClassesAnnotation)),
			Not(HaveKey(AllowedRuntimeClassesAnnotation)), Not(HaveKey(AllowedServiceTypesAnnotation)),
			Not(HaveKey(ForcedNodeSelectorAnnotation))))
		g.Eventually(func() error {
			return alice.Create(ctx, aService(ns, "free-lb", corev1.ServiceTypeLoadBalancer), client.DryRunAll)
		}, timeout, interval).Should(Succeed())
		g.Expect(alice.Create(ctx, aClaim(ns, "free-unset", nil), client.DryRunAll)).To(Succeed())
		p := classPod(ns, "free")
		p.Spec.PriorityClassName, p.Spec.RuntimeClassName, p.Spec.NodeSelector = outsidePriorityClass, ptr.To("kata"), nil
		g.Expect(alice.Create(ctx, withEphemeralVolume(p, ptr.To("fast")), client.DryRunAll)).To(Succeed())
	})
}
