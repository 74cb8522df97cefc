//go:build e2e

package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The uninstall/reinstall cycle on a real cluster, with the real garbage
// collector running: deleting the Tenant CRD deletes every Tenant, and
// nothing a Tenant made may go with it; the same Tenants applied again take
// back what they had, without re-creating anything. The cycle runs twice:
// with the manager running (its finalizer lets the Tenants go, touching
// nothing), and with the manager stopped, where the finalizers are removed
// by hand as an uninstall without the operator would need (then nothing
// but the garbage collector acts, and it finds no owner reference to follow).

// tenantObjects are what Tenant "re" holds, as "kind/name -n namespace".
var tenantObjects = [][]string{
	{"namespace", "re-dev"}, {"namespace", "re-prod"},
	{"rolebinding", "trellis-tenant-admin", "-n", "re-dev"}, {"rolebinding", "trellis-tenant-viewer", "-n", "re-dev"},
	{"resourcequota", "trellis-tenant-quota", "-n", "re-dev"}, {"limitrange", "trellis-tenant-limits", "-n", "re-prod"},
	{"networkpolicy", "trellis-tenant-isolation", "-n", "re-prod"},
	{"clusterrole", "trellis:tenant:re"}, {"clusterrolebinding", "trellis:tenant:re"},
	{"configmap", "precious", "-n", "re-dev"}, // the team's own
}

func objectUIDs(t *testing.T) map[string]string {
	t.Helper()
	uids := map[string]string{}
	for _, o := range tenantObjects {
		out, err := kubectl(append([]string{"get"}, append(o, "-o", "jsonpath={.metadata.uid} {.metadata.deletionTimestamp}")...)...)
		if err != nil {
			t.Fatalf("%v: %v", o, err)
		}
		uid, deleting, _ := strings.Cut(strings.TrimSpace(out), " ")
		if deleting != "" {
			t.Fatalf("%v is being deleted", o)
		}
		uids[strings.Join(o, " ")] = uid
	}
	return uids
}

func reinstallTenantCRD(t *testing.T) {
	t.Helper()
	crds, err := exec.Command(filepath.Join(bin, "kustomize"), "build", filepath.Join(root, "config", "crd")).Output()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubectlIn(crds, "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	// kubectl wait errs on a CRD whose status has no conditions yet: poll.
	waitOutput(t, 60*time.Second, "True", "get", "crd", "tenants.tenancy.trellis.dev",
		"-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
}

// applyReTenant applies Tenant "re" (Delete policy: not even that lets an
// uninstall take a namespace) until the API server accepts it: right after
// the CRD is installed, its endpoint may not serve yet.
func applyReTenant(t *testing.T) {
	t.Helper()
	manifest := strings.Replace(guardedTenantManifest("re"), "spec:\n", "spec:\n  namespaceDeletionPolicy: Delete\n", 1)
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := kubectlIn([]byte(manifest), "apply", "--server-side", "-f", "-")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	if _, err := kubectl("wait", "--for=condition=Ready", "tenant/re", "--timeout=180s"); err != nil {
		t.Fatal(err)
	}
}

func TestTenantReinstallIsANoOp(t *testing.T) {
	useLocalManager(t)
	installTenantAdmissionPolicy(t)
	applyReTenant(t)
	if _, err := kubectl("create", "configmap", "precious", "-n", "re-dev", "--from-literal=data=keep"); err != nil {
		t.Fatal(err)
	}
	want := objectUIDs(t)
	firstUID, _ := kubectl("get", "tenant", "re", "-o", "jsonpath={.metadata.uid}")

	expectKept := func(when string) {
		t.Helper()
		// The garbage collector works asynchronously: give it time to do
		// what it would do.
		time.Sleep(10 * time.Second)
		got := objectUIDs(t)
		for k, uid := range want {
			if got[k] != uid {
				t.Errorf("%s: %s was deleted or re-created", when, k)
			}
		}
		// The team keeps its rights while Trellis is away.
		for _, args := range [][]string{{"create", "deployments", "-n", "re-dev"}, {"get", "namespace/re-prod"}} {
			out, _ := asTenantAdmin("re-admins", append([]string{"auth", "can-i"}, args...)...)
			if strings.TrimSpace(out) != "yes" {
				t.Errorf("%s: the admins lost can-i %s", when, strings.Join(args, " "))
			}
		}
		out, _ := kubectl("get", "namespace", "re-dev", "-o", "jsonpath={.metadata.labels.pod-security\\.kubernetes\\.io/enforce}")
		if strings.TrimSpace(out) != "restricted" {
			t.Errorf("%s: the Pod Security label is %q", when, out)
		}
	}
	reclaimed := func(when string) {
		t.Helper()
		applyReTenant(t)
		uid, _ := kubectl("get", "tenant", "re", "-o", "jsonpath={.metadata.uid}")
		if uid == firstUID {
			t.Fatalf("%s: the Tenant was not re-created", when)
		}
		for _, ns := range []string{"re-dev", "re-prod"} {
			waitOutput(t, 60*time.Second, uid, "get", "namespace", ns, "-o", "jsonpath={.metadata.annotations.tenancy\\.trellis\\.dev/tenant-uid}")
		}
		got := objectUIDs(t)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s was re-created by the new Tenant", when, k)
			}
		}
		waitOutput(t, 60*time.Second, "NamespaceReclaimed", "get", "events", "-n", "default",
			"--field-selector", "involvedObject.kind=Tenant,involvedObject.uid="+uid, "-o", "jsonpath={.items[*].reason}")
		firstUID = uid
	}

	// 1. Uninstalled with the manager running.
	if _, err := kubectl("delete", "crd", "tenants.tenancy.trellis.dev", "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	expectKept("CRD deleted, manager running")
	reinstallTenantCRD(t)
	reclaimed("reinstalled after an uninstall with the manager running")

	// 2. Uninstalled with the manager stopped: the Tenant's finalizer holds
	// the CRD's deletion until someone removes it by hand.
	if err := stopLocalManager(); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("delete", "crd", "tenants.tenancy.trellis.dev", "--wait=false"); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, 60*time.Second, "tenancy.trellis.dev/namespaces", "get", "tenant", "re", "-o", "jsonpath={.metadata.finalizers}")
	if _, err := kubectl("patch", "tenant", "re", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("wait", "--for=delete", "crd/tenants.tenancy.trellis.dev", "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	expectKept("CRD deleted, manager stopped, finalizer removed by hand")
	// Reinstalled as an install does it: the CRD, then the manager.
	reinstallTenantCRD(t)
	if _, err := startLocalManager(); err != nil {
		t.Fatal(err)
	}
	reclaimed("reinstalled after an uninstall without the manager")

	// Deleted for real now (policy Delete): the namespace controller empties
	// the namespaces, guardrails included, unhindered by the admission policy.
	if _, err := kubectl("delete", "tenant", "re", "--wait=true", "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("wait", "--for=delete", "namespace/re-dev", "namespace/re-prod", "--timeout=180s"); err != nil {
		t.Fatal(err)
	}
}
