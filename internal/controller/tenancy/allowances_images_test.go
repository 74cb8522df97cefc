package tenancy

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
)

// What a pod pulls, all of it, against a Tenant's allowances.registries.

const (
	outsideImage = "evil.example.net/payload:1"
	insideImage  = "registry.example.com/team/payload:1"
	// debugRole grants what `kubectl debug` needs and the built-in admin
	// role does not: adding ephemeral containers.
	debugRole = "test-pods-debug"
)

// registriesRefusal is the allowance's message for outsideImage in tenant's namespaces.
func registriesRefusal(tenant string) string {
	return "image " + outsideImage + " (repository evil.example.net/payload) is outside the Tenant " + tenant +
		"'s allowances.registries [registry.example.com/team]"
}

// imagesTenant makes a Tenant of one namespace, <name>-a, under Pod
// Security's restricted level (which admits image volumes: the allowance
// must refuse what it does not), with registries as its allowance (none
// when nil), and returns the namespace and a client for its admin alice,
// who holds there what the built-in admin role holds on a real cluster
// (bindBuiltinAdminRules).
func imagesTenant(g Gomega, name string, registries ...tenancyv1.RegistryPrefix) (string, client.Client) {
	ctx := context.Background()
	tenant := newTenant(name, name+"-", "a")
	tenant.Spec.PodSecurity = tenancyv1.PodSecurity{Enforce: tenancyv1.PodSecurityRestricted}
	tenant.Spec.Allowances.Registries = registries
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, name)
	ns := name + "-a"
	// No kube-controller-manager makes the default ServiceAccount pods need.
	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})).To(Succeed())
	bindBuiltinAdminRules(g, ns)
	return ns, clientAs(g, "alice", name+"-admins")
}

// bindBuiltinAdminRules binds the subjects of Trellis' admin RoleBinding in
// ns to the rules the built-in admin role aggregates on a real cluster:
// those of the API server's own system:aggregate-to-admin, -edit and -view
// roles (envtest runs no aggregation, so admin itself is empty here; roles
// of CRDs that aggregate into admin are left out). So what RBAC refuses the
// tenant admin here, it refuses on a real cluster.
func bindBuiltinAdminRules(g Gomega, ns string) {
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-builtin-admin-rules"}}
	for _, name := range []string{"system:aggregate-to-admin", "system:aggregate-to-edit", "system:aggregate-to-view"} {
		aggregated := &rbacv1.ClusterRole{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, aggregated)).To(Succeed())
		role.Rules = append(role.Rules, aggregated.Rules...)
	}
	if err := k8s.Create(ctx, role); !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	trellis := &rbacv1.RoleBinding{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: adminRoleBindingName}, trellis)).To(Succeed())
	g.Expect(trellis.RoleRef.Name).To(Equal(builtinAdminRole))
	g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "test-builtin-admin-rules"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   trellis.Subjects,
	})).To(Succeed())
}

// grantDebug gives group, in ns, the right to add ephemeral containers.
func grantDebug(g Gomega, ns, group string) {
	ctx := context.Background()
	err := k8s.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: debugRole},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/ephemeralcontainers"}, Verbs: []string{"update", "patch"}}},
	})
	if !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: debugRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: debugRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}},
	})).To(Succeed())
}

// restrictedContainer is a container Pod Security's restricted level admits.
func restrictedContainer(name, image string) corev1.Container {
	return corev1.Container{Name: name, Image: image,
		ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}}
}

// allowedPod is restrictedPod with one container of insideImage.
func allowedPod(ns, name string) *corev1.Pod {
	p := restrictedPod(ns, name, false)
	p.Spec.Containers = []corev1.Container{restrictedContainer("app", insideImage)}
	return p
}

// withImageVolume adds an image volume of image, mounted by the first container.
func withImageVolume(p *corev1.Pod, image string) *corev1.Pod {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "payload", VolumeSource: corev1.VolumeSource{
		Image: &corev1.ImageVolumeSource{Reference: image, PullPolicy: corev1.PullIfNotPresent},
	}})
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts,
		corev1.VolumeMount{Name: "payload", MountPath: "/payload", ReadOnly: true})
	return p
}

// skipWithoutImageVolumes skips t where the API server does not keep a
// pod's image volumes: before Kubernetes 1.35 the ImageVolume feature is
// off by default, the field is dropped, and no pod can pull one.
func skipWithoutImageVolumes(t *testing.T) {
	t.Helper()
	probe := withImageVolume(allowedPod("default", "image-volume-probe"), insideImage)
	if err := k8s.Create(context.Background(), probe, client.DryRunAll); err == nil {
		for _, v := range probe.Spec.Volumes {
			if v.Image != nil {
				return
			}
		}
	}
	t.Skip("this API server does not keep image volumes (the ImageVolume feature is off), so no pod pulls one")
}

// debugContainer is an ephemeral container of image, as kubectl debug adds it.
func debugContainer(image string) corev1.EphemeralContainer {
	return corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon(restrictedContainer("debug", image))}
}

// podImages lists every image p's spec names, in the fields the policy reads.
func podImages(p *corev1.Pod) []string {
	out := make([]string, 0, len(p.Spec.InitContainers)+len(p.Spec.Containers)+len(p.Spec.EphemeralContainers)+len(p.Spec.Volumes))
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		out = append(out, c.Image)
	}
	for _, c := range p.Spec.EphemeralContainers {
		out = append(out, c.Image)
	}
	for _, v := range p.Spec.Volumes {
		if v.Image != nil {
			out = append(out, v.Image.Reference)
		}
	}
	return out
}

// imageWords are what the walk looks for (the rule below).
var imageWords = []string{"image", "registry", "repository", "oci", "artifact", "digest"}

// imageFieldPaths walks t (corev1.PodSpec) and returns the JSON path
// (spec.containers[].image) of every field that may name an image, by this
// rule: a field of a string kind, or a list or map of them, whose JSON path
// or the Go type of the struct that holds it mentions one of imageWords
// (in any case). It finds the containers' image and an image volume's
// reference, and anything a later Kubernetes adds under such a name (an
// OCI artifact volume, an image digest); it also finds fields that name
// something else (a pull policy, a Ceph image), which the test lists with
// what they name.
func imageFieldPaths(t reflect.Type) []string { return fieldPathsNaming(t, imageWords) }

// fieldPathsNaming is imageFieldPaths' walk, for any words.
func fieldPathsNaming(t reflect.Type, words []string) []string {
	var out []string
	var walk func(t reflect.Type, path, holder string, onPath map[reflect.Type]bool)
	walk = func(t reflect.Type, path, holder string, onPath map[reflect.Type]bool) {
		switch t.Kind() {
		case reflect.Pointer:
			walk(t.Elem(), path, holder, onPath)
		case reflect.Slice, reflect.Array:
			walk(t.Elem(), path+"[]", holder, onPath)
		case reflect.Map:
			walk(t.Elem(), path+"{}", holder, onPath)
		case reflect.String:
			where := strings.ToLower(path + " " + holder)
			if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(where, w) }) {
				out = append(out, path)
			}
		case reflect.Struct:
			if onPath[t] { // a recursive type: its fields are walked once per path
				return
			}
			onPath[t] = true
			defer delete(onPath, t)
			for i := range t.NumField() {
				f := t.Field(i)
				name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
				if !f.IsExported() || name == "-" {
					continue
				}
				p := path + "." + name
				if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
					p = path // EphemeralContainerCommon's fields are the container's
				}
				walk(f.Type, p, t.Name(), onPath)
			}
		}
	}
	walk(t, "spec", "", map[reflect.Type]bool{})
	return out
}

// TestEveryPodFieldThatNamesAnImageIsRead closes a class of attack: a pod
// field that names an image the tenant-allowances policy does not read
// pulls from any registry (image volumes did, issue #34). It walks
// corev1.PodSpec by reflection (imageFieldPaths' rule) and fails when the
// walk finds a path that is neither read by the policy (imageReaders: each
// with how to put an image there) nor known to name something else
// (notAnImage) — so a field added in a later Kubernetes fails here until
// the policy reads it — or when a listed path no longer exists. For each
// path read, a tenant admin (the built-in admin role's rules, impersonated)
// is refused a pod with an image from elsewhere there, with the
// allowance's message, and admitted with an allowed one. Ephemeral
// containers can only be added to a running pod, through the
// pods/ephemeralcontainers subresource, which the admin role does not
// grant: the admin here is also given it, as for kubectl debug.
func TestEveryPodFieldThatNamesAnImageIsRead(t *testing.T) {
	imageReaders := map[string]struct {
		put       func(p *corev1.Pod, image string)
		ephemeral bool // put through pods/ephemeralcontainers, on a pod made first
	}{
		"spec.containers[].image": {put: func(p *corev1.Pod, image string) { p.Spec.Containers[0].Image = image }},
		"spec.initContainers[].image": {put: func(p *corev1.Pod, image string) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, restrictedContainer("init", image))
		}},
		"spec.ephemeralContainers[].image": {ephemeral: true, put: func(p *corev1.Pod, image string) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, debugContainer(image))
		}},
		"spec.volumes[].image.reference": {put: func(p *corev1.Pod, image string) { withImageVolume(p, image) }},
	}
	notAnImage := map[string]string{
		"spec.containers[].imagePullPolicy":          "when to pull, not what",
		"spec.initContainers[].imagePullPolicy":      "when to pull, not what",
		"spec.ephemeralContainers[].imagePullPolicy": "when to pull, not what",
		"spec.volumes[].image.pullPolicy":            "when to pull, not what",
		"spec.imagePullSecrets[].name":               "a Secret of registry credentials, which pulls nothing of its own",
		"spec.volumes[].rbd.image":                   "a Ceph RBD block device the node maps, not a registry's image",
		"spec.volumes[].gitRepo.repository":          "a git repository (the kubelet's gitRepo driver is off and locked off from Kubernetes 1.36; restricted Pod Security refuses it)",
		"spec.volumes[].quobyte.registry":            "a Quobyte storage registry (the in-tree plugin is gone since Kubernetes 1.25)",
	}

	t.Run("the walk finds no field the policy does not read", func(t *testing.T) {
		g := NewWithT(t)
		found := imageFieldPaths(reflect.TypeFor[corev1.PodSpec]())
		for _, path := range found {
			_, read := imageReaders[path]
			_, other := notAnImage[path]
			g.Expect(read || other).To(BeTrue(),
				"%s may name an image: make config/admission/tenant_allowances.yaml read it and add it to imageReaders, or say in notAnImage what it names", path)
		}
		for path := range imageReaders {
			g.Expect(found).To(ContainElement(path), "imageReaders lists %s, which corev1.PodSpec no longer has", path)
		}
		for path := range notAnImage {
			g.Expect(found).To(ContainElement(path), "notAnImage lists %s, which corev1.PodSpec no longer has", path)
		}
	})

	g := NewWithT(t)
	ctx := context.Background()
	ns, alice := imagesTenant(g, "img", "registry.example.com/team")
	grantDebug(g, ns, "img-admins")
	// The policy, the namespace's annotation and alice's bindings are each
	// seen by the API server a moment after they are made.
	g.Eventually(func() error {
		probe := allowedPod(ns, "probe")
		probe.Spec.Containers[0].Image = outsideImage
		return alice.Create(ctx, probe, client.DryRunAll)
	}, timeout, interval).Should(MatchError(ContainSubstring(registriesRefusal("img"))))

	n := 0
	for path, reader := range imageReaders {
		t.Run(path, func(t *testing.T) {
			if path == "spec.volumes[].image.reference" {
				skipWithoutImageVolumes(t)
			}
			for _, tc := range []struct {
				image   string
				refused bool
			}{{outsideImage, true}, {insideImage, false}} {
				g := NewWithT(t)
				n++
				pod := allowedPod(ns, "walk-"+strconv.Itoa(n))
				var err error
				if reader.ephemeral {
					g.Expect(alice.Create(ctx, pod)).To(Succeed())
					reader.put(pod, tc.image)
					err = alice.SubResource("ephemeralcontainers").Update(ctx, pod)
				} else {
					reader.put(pod, tc.image)
					err = alice.Create(ctx, pod)
				}
				if !tc.refused {
					g.Expect(err).NotTo(HaveOccurred(), "%s at %s", tc.image, path)
					continue
				}
				g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s at %s: got %v", tc.image, path, err)
				g.Expect(err.Error()).To(ContainSubstring(registriesRefusal("img")))
				live := &corev1.Pod{}
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), live); !apierrors.IsNotFound(err) {
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(podImages(live)).NotTo(ContainElement(tc.image), "the refused image is on the pod")
				}
			}
		})
	}
}

// TestTenantAllowancesOperationByOperation: the tenant-allowances policy's
// registries, for every operation a tenant admin (the built-in admin role's
// rules, impersonated) may send on a pod: what they get, who refuses them
// otherwise, and what holds afterwards. Pods of an image volume from
// elsewhere are made before the allowance is set ("legacy"), so that the
// operations that keep a pod's images (metadata, deletion, the
// subresources) are seen on pods the allowance would refuse today: an
// UPDATE is checked for the images it adds, and adds none here. Where the
// role does not reach an operation, the row proves RBAC refuses it.
func TestTenantAllowancesOperationByOperation(t *testing.T) {
	skipWithoutImageVolumes(t) // its legacy pods hold image volumes
	g := NewWithT(t)
	ctx := context.Background()
	ns, alice := imagesTenant(g, "imgops")
	legacy := []string{"labels", "annotations", "owner", "finalizers", "delete", "debug", "debug-elsewhere", "binding", "eviction", "status", "volumes"}
	for _, name := range legacy {
		g.Eventually(func() error {
			return alice.Create(ctx, withImageVolume(allowedPod(ns, name), outsideImage))
		}, timeout, interval).Should(Succeed(), "before the allowance, %s", name)
	}
	g.Eventually(func() error {
		tenant := getTenant(g, "imgops")
		tenant.Spec.Allowances.Registries = []tenancyv1.RegistryPrefix{"registry.example.com/team"}
		return k8s.Update(ctx, tenant)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() map[string]string { return getNamespace(g, ns).Annotations }, timeout, interval).
		Should(HaveKeyWithValue(AllowedRegistriesAnnotation, "registry.example.com/team"))
	g.Eventually(func() error {
		probe := allowedPod(ns, "probe")
		probe.Spec.Containers[0].Image = outsideImage
		return alice.Create(ctx, probe, client.DryRunAll)
	}, timeout, interval).Should(MatchError(ContainSubstring(registriesRefusal("imgops"))))
	anchor := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "anchor"}}
	g.Expect(alice.Create(ctx, anchor)).To(Succeed())

	get := func(g Gomega, name string) *corev1.Pod {
		p := &corev1.Pod{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
		return p
	}
	update := func(name string, change func(*corev1.Pod)) error {
		p := &corev1.Pod{}
		if err := alice.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		change(p)
		return alice.Update(ctx, p)
	}
	legacyImages := []string{insideImage, outsideImage}
	keepsItsImages := func(name string) func(Gomega) {
		return func(g Gomega) { g.Expect(podImages(get(g, name))).To(ConsistOf(legacyImages)) }
	}
	const (
		byAllowance = iota
		byRBAC
		byValidation
		admitted
	)
	rows := []struct {
		operation string
		do        func() error
		verdict   int
		want      string // in the refusal
		after     func(Gomega)
	}{
		{"CREATE a pod with an image volume from elsewhere", func() error {
			return alice.Create(ctx, withImageVolume(allowedPod(ns, "new-volume"), outsideImage))
		}, byAllowance, registriesRefusal("imgops"), func(g Gomega) {
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "new-volume"}, &corev1.Pod{}))).To(BeTrue())
		}},
		{"CREATE a pod with an image volume of an allowed registry", func() error {
			return alice.Create(ctx, withImageVolume(allowedPod(ns, "new-allowed"), insideImage))
		}, admitted, "", func(g Gomega) {
			g.Expect(podImages(get(g, "new-allowed"))).To(ConsistOf(insideImage, insideImage))
		}},
		{"UPDATE metadata: labels", func() error {
			return update("labels", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} })
		}, admitted, "", keepsItsImages("labels")},
		{"UPDATE metadata: annotations", func() error {
			return update("annotations", func(p *corev1.Pod) { p.Annotations = map[string]string{"example.com/note": "x"} })
		}, admitted, "", keepsItsImages("annotations")},
		{"UPDATE metadata: ownerReferences", func() error {
			return update("owner", func(p *corev1.Pod) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: anchor.Name, UID: anchor.UID}}
			})
		}, admitted, "", keepsItsImages("owner")},
		{"UPDATE metadata: finalizers", func() error {
			return update("finalizers", func(p *corev1.Pod) { p.Finalizers = []string{"example.com/hold"} })
		}, admitted, "", keepsItsImages("finalizers")},
		{"UPDATE a container's image to one from elsewhere", func() error {
			return update("labels", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "evil.example.net/other:1" })
		}, byAllowance, "image evil.example.net/other:1 (repository evil.example.net/other) is outside", keepsItsImages("labels")},
		{"UPDATE: add an image volume (a pod's volumes cannot change)", func() error {
			return update("volumes", func(p *corev1.Pod) {
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "more", VolumeSource: corev1.VolumeSource{
					Image: &corev1.ImageVolumeSource{Reference: "evil.example.net/other:1", PullPolicy: corev1.PullIfNotPresent}}})
			})
		}, byValidation, "pod updates may not change fields other than", keepsItsImages("volumes")},
		{"UPDATE: point the image volume elsewhere (a pod's volumes cannot change)", func() error {
			return update("volumes", func(p *corev1.Pod) { p.Spec.Volumes[0].Image.Reference = "evil.example.net/other:1" })
		}, byValidation, "pod updates may not change fields other than", keepsItsImages("volumes")},
		{"DELETE a pod", func() error {
			return alice.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "delete"}})
		}, admitted, "", func(g Gomega) {
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "delete"}, &corev1.Pod{}))).To(BeTrue())
		}},
		{"pods/ephemeralcontainers: add a debug container (the admin role does not grant it)", func() error {
			p := get(g, "debug")
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugContainer(insideImage)}
			return alice.SubResource("ephemeralcontainers").Update(ctx, p)
		}, byRBAC, `cannot update resource "pods/ephemeralcontainers"`, func(g Gomega) {
			g.Expect(get(g, "debug").Spec.EphemeralContainers).To(BeEmpty())
		}},
		{"pods/binding: bind the pod to a node (the admin role does not grant it)", func() error {
			return alice.SubResource("binding").Create(ctx, get(g, "binding"), &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: "binding"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-a"}})
		}, byRBAC, `cannot create resource "pods/binding"`, func(g Gomega) {
			g.Expect(get(g, "binding").Spec.NodeName).To(BeEmpty())
		}},
		{"pods/eviction: evict the pod (pulls nothing; the policy is not asked)", func() error {
			return alice.SubResource("eviction").Create(ctx, get(g, "eviction"), &policyv1.Eviction{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eviction"}})
		}, admitted, "", func(g Gomega) {
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "eviction"}, &corev1.Pod{}))).To(BeTrue())
		}},
		{"pods/status: write the status (the admin role does not grant it)", func() error {
			p := get(g, "status")
			p.Status.Phase = corev1.PodRunning
			return alice.Status().Update(ctx, p)
		}, byRBAC, `cannot update resource "pods/status"`, func(g Gomega) {
			g.Expect(get(g, "status").Status.Phase).NotTo(Equal(corev1.PodRunning))
		}},
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
			case byRBAC:
				g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
				g.Expect(err.Error()).To(ContainSubstring(`User "alice" ` + row.want))
			case byValidation:
				g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
				g.Expect(err.Error()).To(ContainSubstring(row.want))
			}
			row.after(g)
		})
	}

	t.Run("pods/ephemeralcontainers, for an admin also given it (kubectl debug)", func(t *testing.T) {
		g := NewWithT(t)
		grantDebug(g, ns, "imgops-admins")
		g.Eventually(func() error {
			p := get(g, "debug-elsewhere")
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugContainer("evil.example.net/other:1")}
			return alice.SubResource("ephemeralcontainers").Update(ctx, p)
		}, timeout, interval).Should(And(
			WithTransform(apierrors.IsForbidden, BeTrue()),
			MatchError(ContainSubstring("image evil.example.net/other:1 (repository evil.example.net/other) is outside"))))
		g.Expect(get(g, "debug-elsewhere").Spec.EphemeralContainers).To(BeEmpty())

		// The image volume the pod had is no image the request adds: a
		// debug container of an allowed image may mount it, and one of the
		// very image the volume pulls adds no pull of its own.
		p := get(g, "debug")
		debug := debugContainer(insideImage)
		debug.VolumeMounts = []corev1.VolumeMount{{Name: "payload", MountPath: "/payload", ReadOnly: true}}
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{debug}
		g.Expect(alice.SubResource("ephemeralcontainers").Update(ctx, p)).To(Succeed())
		g.Expect(podImages(get(g, "debug"))).To(ConsistOf(insideImage, outsideImage, insideImage))
		p = get(g, "debug-elsewhere")
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugContainer(outsideImage)}
		g.Expect(alice.SubResource("ephemeralcontainers").Update(ctx, p)).To(Succeed())
	})
}
