//go:build e2e

package chart_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/navique/lockguard/e2e/framework"
)

// kubeVersions returns the Kubernetes versions whose control plane is cached
// (make kube builds every one the Makefile lists), the default first.
func kubeVersions(t *testing.T) []string {
	t.Helper()
	assets, err := framework.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	found, _ := filepath.Glob(filepath.Join(assets, "v*", "kube-apiserver"))
	var versions []string
	for _, f := range found {
		versions = append(versions, strings.TrimPrefix(filepath.Base(filepath.Dir(f)), "v"))
	}
	slices.SortFunc(versions, func(a, b string) int {
		if a == framework.Version() {
			return -1
		}
		if b == framework.Version() {
			return 1
		}
		return strings.Compare(b, a)
	})
	if len(versions) == 0 {
		if os.Getenv("LOCKGUARD_REQUIRE_KUBE") == "1" {
			t.Fatalf("no control plane cached in %s: run make kube", assets)
		}
		t.Skipf("no control plane cached in %s: run make kube", assets)
	}
	return versions
}

// installCase is one configuration of the chart installed on the API server.
type installCase struct {
	name string
	set  []string
	// wantErr, when set, is part of the error helm template must fail with
	// on this API server.
	wantErr string
}

var installCases = []installCase{
	{name: "webhook"},
	{name: "policy", set: []string{"mode=policy"}},
	{name: "both", set: []string{"mode=both"}},
	{name: "disabled", set: []string{"lockGuard.enabled=false"}},
	{name: "user-issuer", set: []string{"certManager.issuerRef.name=corp-ca", "certManager.issuerRef.kind=ClusterIssuer"}},
	{name: "user-secret", set: []string{"certManager.enabled=false", "webhook.tls.existingSecret=my-tls", "webhook.tls.caBundle=Y2E="}},
	{name: "service-monitor", set: []string{"metrics.serviceMonitor.enabled=true", "replicas=3"}},
	{name: "monitoring", set: []string{"metrics.prometheusRule.enabled=true", "metrics.dashboard.enabled=true"}},
	{name: "network-policy", set: append([]string{"networkPolicy.enabled=true"}, networkPolicySources...)},
}

// TestInstall installs the chart with server-side apply on the real API
// server of every cached Kubernetes version, in each mode, and checks that
// the API server accepts every object, that the pod passes the restricted
// Pod Security Standard, and (where the API server serves it) that the
// ValidatingAdmissionPolicy alone denies deleting a locked object.
func TestInstall(t *testing.T) {
	requireHelm(t)
	for _, v := range kubeVersions(t) {
		t.Run(v, func(t *testing.T) { testInstall(t, v) })
	}
}

func testInstall(t *testing.T, version string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	certManagerCRDs, err := framework.CertManagerCRDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	serviceMonitorCRD, err := framework.ServiceMonitorCRD(ctx)
	if err != nil {
		t.Fatal(err)
	}
	prometheusRuleCRD, err := framework.PrometheusRuleCRD(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env := framework.StartForTest(t, framework.Options{
		Version: version,
		CRDDirs: []string{certManagerCRDs, serviceMonitorCRD, prometheusRuleCRD, repoFile(t, "e2e/testdata/crds/stacks.yaml")},
	})
	c, err := client.New(env.Config, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	kubeVersion, apiVersions, err := framework.Capabilities(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	policyCapable := slices.Contains(apiVersions, vapCapability)
	if want := !strings.HasPrefix(version, "1.29."); policyCapable != want {
		t.Fatalf("API server v%s serves %s: %v; want %v", version, vapCapability, policyCapable, want)
	}

	for _, tc := range installCases {
		t.Run(tc.name, func(t *testing.T) {
			wantErr := tc.wantErr
			if tc.name == "policy" && !policyCapable {
				wantErr = "mode=policy needs ValidatingAdmissionPolicy in admissionregistration.k8s.io/v1"
			}
			ns := "lg-" + tc.name
			r := framework.Release{Name: "lg-" + tc.name, Namespace: ns, KubeVersion: kubeVersion,
				APIVersions: apiVersions, Set: tc.set, IncludeCRDs: true}
			objs, err := framework.Render(ctx, r)
			if wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), wantErr) {
					t.Fatalf("helm template on v%s: got error %v; want %q", version, err, wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]bool{}
			for _, o := range objs {
				kinds[o.GetKind()] = true
			}
			if tc.name == "both" && kinds["ValidatingAdmissionPolicy"] != policyCapable {
				t.Errorf("mode both on v%s rendered a ValidatingAdmissionPolicy: %v; want %v", version, kinds["ValidatingAdmissionPolicy"], policyCapable)
			}
			// Leave no admission configuration behind: the webhooks point
			// at Services with no lockguard behind them.
			t.Cleanup(func() {
				for _, o := range objs {
					if strings.HasPrefix(o.GetKind(), "Validating") {
						if err := client.IgnoreNotFound(c.Delete(ctx, o)); err != nil {
							t.Errorf("deleting %s %s: %v", o.GetKind(), o.GetName(), err)
						}
					}
				}
			})
			createRestrictedNamespace(ctx, t, c, ns)
			install(ctx, t, c, objs)
			if kinds["NetworkPolicy"] {
				checkNetworkPolicyValidated(ctx, t, c, objs)
			}
			if kinds["ServiceMonitor"] {
				checkServiceMonitor(ctx, t, env.Config, c, objs)
			}
			if kinds["FlowSchema"] {
				checkFlowSchema(ctx, t, env.Config, c, objs)
			} else if kinds["ValidatingWebhookConfiguration"] {
				t.Errorf("a webhook without a FlowSchema for its reads")
			}
			deployments := 0
			for _, o := range objs {
				if o.GetKind() == "Deployment" {
					deployments++
					checkPodSecurity(ctx, t, c, ns, o)
				}
			}
			if want := map[bool]int{true: 0, false: 1}[tc.name == "disabled"]; deployments != want {
				t.Errorf("%d Deployments rendered; want %d", deployments, want)
			}
		})
	}

	t.Run("plain-manifest", func(t *testing.T) {
		// deploy/lockguard.yaml brings its namespace, which enforces the
		// restricted standard.
		objs := readObjects(t, "deploy/lockguard.yaml")
		t.Cleanup(func() {
			for _, o := range objs {
				if strings.HasPrefix(o.GetKind(), "Validating") {
					_ = c.Delete(ctx, o)
				}
			}
		})
		install(ctx, t, c, objs)
		for _, o := range objs {
			if o.GetKind() == "Deployment" {
				checkPodSecurity(ctx, t, c, o.GetNamespace(), o)
			}
		}
	})

	t.Run("LockNames", func(t *testing.T) { testLockNames(ctx, t, env, c) })

	if policyCapable {
		t.Run("PolicyDeniesLockedDeletes", func(t *testing.T) { testPolicy(ctx, t, c, kubeVersion, apiVersions) })
		t.Run("PolicyReadOnlyGuardDisabled", func(t *testing.T) { testPolicyReadOnly(ctx, t, env, kubeVersion, apiVersions) })
		t.Run("UnlockPolicyWithoutLockguard", func(t *testing.T) { testUnlockPolicy(ctx, t, env, c, kubeVersion, apiVersions) })
	}
}

// createRestrictedNamespace creates a namespace that enforces the restricted
// Pod Security Standard.
func createRestrictedNamespace(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// install server-side applies the objects (the CRDs first, as helm does) and
// reads each one back.
func install(ctx context.Context, t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	sorted := slices.Clone(objs)
	slices.SortStableFunc(sorted, func(a, b *unstructured.Unstructured) int {
		ca, cb := a.GetKind() == "CustomResourceDefinition", b.GetKind() == "CustomResourceDefinition"
		switch {
		case ca && !cb:
			return -1
		case cb && !ca:
			return 1
		}
		return 0
	})
	for _, o := range sorted {
		if err := applyRetryingUnknownKinds(ctx, c, o); err != nil {
			t.Errorf("the API server refused %s %s: %v", o.GetKind(), o.GetName(), err)
			continue
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Errorf("reading back %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// applyRetryingUnknownKinds applies o, retrying while its kind is not yet
// served (a CRD applied a moment before).
func applyRetryingUnknownKinds(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = framework.Apply(ctx, c, o)
		if last == nil {
			return true, nil
		}
		if strings.Contains(last.Error(), "no matches for kind") {
			return false, nil
		}
		return false, last
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

// checkPodSecurity creates (dry run) a pod from the Deployment's template in
// the restricted namespace, where the PodSecurity admission plugin enforces
// the restricted standard, after checking that a pod allowing privilege
// escalation is refused there.
func checkPodSecurity(ctx context.Context, t *testing.T, c client.Client, ns string, u *unstructured.Unstructured) {
	t.Helper()
	d := convert[appsv1.Deployment](t, u)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-security-check", Namespace: ns, Labels: d.Spec.Template.Labels},
		Spec:       *d.Spec.Template.Spec.DeepCopy(),
	}
	escalating := pod.DeepCopy()
	escalating.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
	err := c.Create(ctx, escalating, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Fatalf("a pod allowing privilege escalation in %s: got %v; want it refused by PodSecurity (is the check real?)", ns, err)
	}
	if err := c.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Errorf("lockguard's pod does not pass the restricted Pod Security Standard: %v", err)
	}
}

// testPolicy applies the chart's ValidatingAdmissionPolicy and its binding
// alone (no webhook, no lockguard) and checks that the API server denies
// deleting a core.navique.com object whose core.navique.com/locked
// annotation is not empty, with the contract's message, and nothing else.
func testPolicy(ctx context.Context, t *testing.T, c client.Client, kubeVersion string, apiVersions []string) {
	objs, err := framework.Render(ctx, framework.Release{Name: "lockguard", Namespace: "lockguard-system",
		KubeVersion: kubeVersion, APIVersions: apiVersions, Set: []string{"mode=policy"}, IncludeCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	var policy []*unstructured.Unstructured
	for _, o := range objs {
		// The policy of locked objects; the unlock policy (TestUnlockRender,
		// e2e/contract's TestUnlockPermission) is not this test's.
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") && o.GetName() == "lockguard-locked" || o.GetKind() == "CustomResourceDefinition" {
			policy = append(policy, o)
		}
	}
	if got := framework.Kinds(policy); len(got) != 5 {
		t.Fatalf("mode=policy rendered %v; want the Lock, LockException and ClusterLock CRDs, the policy and its binding", got)
	}
	install(ctx, t, c, policy)

	const ns = "forge"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	stack := func(name, version, locked string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("core.navique.com/" + version)
		u.SetKind("Stack")
		u.SetNamespace(ns)
		u.SetName(name)
		if locked != "-" {
			u.SetAnnotations(map[string]string{"core.navique.com/locked": locked})
		}
		return u
	}
	create := func(u *unstructured.Unstructured) {
		t.Helper()
		if err := c.Create(ctx, u.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	create(stack("locked", "v1alpha1", "lock-b,protect-forge"))
	create(stack("free", "v1alpha1", "-"))
	create(stack("empty", "v1alpha1", ""))
	const wantMsg = "resource is protected by Lock(s) [lock-b protect-forge]; delete the Lock(s) before deleting this resource"

	// Policies are loaded asynchronously: wait until the dry-run delete of
	// the locked Stack is denied.
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = c.Delete(ctx, stack("locked", "v1alpha1", "-"), client.DryRunAll)
		return last != nil, nil
	}); err != nil {
		t.Fatalf("the policy never denied the delete of an annotated Stack: last answer %v", last)
	}
	for _, version := range []string{"v1alpha1", "v1beta1"} {
		for _, opts := range [][]client.DeleteOption{nil, {client.DryRunAll}} {
			err := c.Delete(ctx, stack("locked", version, "-"), opts...)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "denied request: "+wantMsg) {
				t.Errorf("deleting the locked Stack through %s (%v): got %v; want Forbidden with %q", version, opts, err, wantMsg)
			}
		}
	}
	// deletecollection: the locked Stack stays.
	if err := c.DeleteAllOf(ctx, stack("", "v1alpha1", "-"), client.InNamespace(ns)); err == nil || !strings.Contains(err.Error(), wantMsg) {
		t.Errorf("deletecollection of Stacks: got %v; want the locked one denied", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "locked"}, stack("", "v1alpha1", "-")); err != nil {
		t.Errorf("the locked Stack is gone: %v", err)
	}
	for _, name := range []string{"free", "empty"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, stack("", "v1alpha1", "-")); !apierrors.IsNotFound(err) {
			t.Errorf("Stack %s (not locked) was not deleted by the deletecollection: %v", name, err)
		}
	}

	// Outside the group, and Locks themselves, are never denied.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "annotated", Namespace: ns,
		Annotations: map[string]string{"core.navique.com/locked": "protect-forge"}}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, cm); err != nil {
		t.Errorf("deleting an annotated ConfigMap: %v; the policy must only match core.navique.com", err)
	}
	lock := &unstructured.Unstructured{}
	lock.SetGroupVersionKind(schema.GroupVersionKind{Group: "core.navique.com", Version: "v1alpha1", Kind: "Lock"})
	lock.SetNamespace(ns)
	lock.SetName("protect-forge")
	lock.SetAnnotations(map[string]string{"core.navique.com/locked": "someone"})
	if err := unstructured.SetNestedStringMap(lock.Object, map[string]string{"kind": "Stack", "name": "locked"}, "spec", "targetRef"); err != nil {
		t.Fatal(err)
	}
	create(lock)
	if err := c.Delete(ctx, lock); err != nil {
		t.Errorf("deleting an annotated Lock: %v; deleting a Lock is never blocked", err)
	}

	// Once the annotation is gone (lockguard removes it with the last
	// Lock), the delete goes through.
	patch := []byte(`{"metadata":{"annotations":{"core.navique.com/locked":null}}}`)
	if err := c.Patch(ctx, stack("locked", "v1alpha1", "-"), client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, stack("locked", "v1alpha1", "-")); err != nil {
		t.Errorf("deleting the Stack once unannotated: %v", err)
	}
}

// checkFlowSchema checks with the API server's own classification (API
// Priority and Fairness answers every request with the UID of the
// FlowSchema it matched, in X-Kubernetes-PF-FlowSchema-UID) that the
// chart's FlowSchema takes lockguard's list of a namespace's Locks, the
// read that confirms an allowed delete, and leaves its informer's
// cluster-wide list and other users' lists alone.
func checkFlowSchema(ctx context.Context, t *testing.T, cfg *rest.Config, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	var schema, sa *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "FlowSchema":
			schema = o
		case "ServiceAccount":
			sa = o
		}
	}
	if sa == nil {
		t.Fatal("no ServiceAccount rendered")
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(schema.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(schema), live); err != nil {
		t.Fatal(err)
	}
	classify := func(user, path string) string {
		t.Helper()
		imp := rest.CopyConfig(cfg)
		imp.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
		hc, err := rest.HTTPClientFor(imp)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, imp.Host+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")
	}
	lockguard := "system:serviceaccount:" + sa.GetNamespace() + ":" + sa.GetName()
	const namespaced, clusterWide = "/apis/core.navique.com/v1alpha1/namespaces/default/locks", "/apis/core.navique.com/v1alpha1/locks"
	if got := classify(lockguard, namespaced); got != string(live.GetUID()) {
		t.Errorf("lockguard's list of a namespace's Locks went to FlowSchema %q, want %s (%s)", got, live.GetName(), live.GetUID())
	}
	if got := classify(lockguard, clusterWide); got == "" || got == string(live.GetUID()) {
		t.Errorf("lockguard's cluster-wide list of Locks went to FlowSchema %q, want another one", got)
	}
	if got := classify("system:serviceaccount:default:someone", namespaced); got == "" || got == string(live.GetUID()) {
		t.Errorf("another ServiceAccount's list of Locks went to FlowSchema %q, want another one", got)
	}
}

// testLockNames checks, with the API server's discovery and the real
// kubectl, the names the Lock CRD (installed by the cases above) gives
// kubectl get: the short name lk, which no other resource of this API
// server serves, and the category navique, not all (kubectl delete all
// --all must not delete Locks, which would lift the protection of whatever
// it deletes next).
func testLockNames(ctx context.Context, t *testing.T, env *framework.Env, c client.Client) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var lock *metav1.APIResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range l.APIResources {
			if gv.Group == "core.navique.com" && r.Name == "locks" {
				lock = &l.APIResources[i]
				continue
			}
			if r.Name == "lk" || r.SingularName == "lk" || slices.Contains(r.ShortNames, "lk") {
				t.Errorf("%s %s also answers to lk (short names %v): kubectl get lk would be ambiguous", l.GroupVersion, r.Name, r.ShortNames)
			}
		}
	}
	if lock == nil {
		t.Fatal("discovery does not list core.navique.com locks")
	}
	if !slices.Equal(lock.ShortNames, []string{"lk"}) || !slices.Equal(lock.Categories, []string{"navique"}) {
		t.Errorf("locks: short names %v, categories %v; want [lk], [navique]", lock.ShortNames, lock.Categories)
	}

	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("LOCKGUARD_REQUIRE_KUBE") == "1" {
			t.Fatalf("kubectl is not on PATH (make puts the pinned one in bin/path): %v", err)
		}
		t.Skipf("kubectl is not on PATH: %v", err)
	}
	kubeconfig := filepath.Join(env.Dir, "names.kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	const ns = "lock-names"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	l := &unstructured.Unstructured{}
	l.SetGroupVersionKind(schema.GroupVersionKind{Group: "core.navique.com", Version: "v1alpha1", Kind: "Lock"})
	l.SetNamespace(ns)
	l.SetName("protect-forge")
	if err := unstructured.SetNestedStringMap(l.Object, map[string]string{"kind": "Stack", "name": "forge"}, "spec", "targetRef"); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"get", "lk"}, {"get", "lk.core.navique.com"}, {"get", "navique"}} {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, kubectl, append(args, "--kubeconfig", kubeconfig, "-n", ns, "-o", "name")...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
			continue
		}
		if got, want := strings.TrimSpace(stdout.String()), "lock.core.navique.com/protect-forge"; got != want {
			t.Errorf("kubectl %s -o name: %q; want %q", strings.Join(args, " "), got, want)
		}
	}
	// Chart.yaml's Artifact Hub example Lock is valid (server-side dry
	// run, strict field validation).
	var examples []map[string]any
	if err := yaml.Unmarshal([]byte(chartMetadata(t).Annotations["artifacthub.io/crdsExamples"]), &examples); err != nil || len(examples) == 0 {
		t.Fatalf("artifacthub.io/crdsExamples: %v (%d examples)", err, len(examples))
	}
	for _, e := range examples {
		u := &unstructured.Unstructured{Object: e}
		u.SetNamespace(ns)
		if err := c.Create(ctx, u, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
			t.Errorf("the API server refuses Chart.yaml's example %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}

	// Not in category all: kubectl get all leaves Locks out.
	out, err := exec.CommandContext(ctx, kubectl, "get", "all", "--kubeconfig", kubeconfig, "-n", ns, "-o", "name").Output()
	if err != nil || strings.Contains(string(out), "lock.core.navique.com") {
		t.Errorf("kubectl get all: %v, %q; want no Lock listed", err, out)
	}
}

// checkServiceMonitor checks the installed ServiceMonitor against
// prometheus-operator's CRD with strict field validation (an unknown field
// is refused, so the rendered fields are all known to it), and that the
// scraper identity the chart creates is allowed to get /metrics, asking the
// API server as that ServiceAccount (with a token from the TokenRequest API:
// the control plane here runs no token controller to fill the chart's token
// Secret).
func checkServiceMonitor(ctx context.Context, t *testing.T, cfg *rest.Config, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	var sm, scraper *unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.GetKind() == "ServiceMonitor":
			sm = o
		case o.GetKind() == "ServiceAccount" && strings.HasSuffix(o.GetName(), "-metrics-scraper"):
			scraper = o
		}
	}
	if scraper == nil {
		t.Fatalf("no scraper ServiceAccount rendered: %v", framework.Kinds(objs))
	}
	strict := []client.CreateOption{client.DryRunAll, client.FieldValidation("Strict")}
	bad := sm.DeepCopy()
	bad.SetName(sm.GetName() + "-misspelled")
	bad.SetResourceVersion("")
	eps, _, _ := unstructured.NestedSlice(bad.Object, "spec", "endpoints")
	eps[0].(map[string]any)["tlsConfigs"] = map[string]any{}
	if err := unstructured.SetNestedSlice(bad.Object, eps, "spec", "endpoints"); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, bad, strict...); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("a ServiceMonitor with a misspelled field under strict validation: got %v; want it refused (is the check real?)", err)
	}
	good := sm.DeepCopy()
	good.SetName(sm.GetName() + "-strict")
	good.SetResourceVersion("")
	if err := c.Create(ctx, good, strict...); err != nil {
		t.Errorf("prometheus-operator's ServiceMonitor CRD refuses the rendered ServiceMonitor under strict validation: %v", err)
	}

	sa := &corev1.ServiceAccount{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(scraper), sa); err != nil {
		t.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("requesting a token for %s: %v", sa.Name, err)
	}
	asScraper := rest.AnonymousClientConfig(cfg)
	asScraper.BearerToken = tr.Status.Token
	sc, err := client.New(asScraper, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{"/metrics": true, "/debug/pprof/": false} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"}}}
		if err := sc.Create(ctx, review); err != nil {
			t.Fatalf("SelfSubjectAccessReview as %s: %v", sa.Name, err)
		}
		if review.Status.Allowed != want {
			t.Errorf("%s may get %s: %v; want %v (%s)", sa.Name, path, review.Status.Allowed, want, review.Status.Reason)
		}
	}
}

// checkNetworkPolicyValidated checks that the API server's validation of
// the NetworkPolicy the install applied is real: the same object with an
// invalid CIDR is refused (server-side dry run).
func checkNetworkPolicyValidated(ctx context.Context, t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "NetworkPolicy" {
			continue
		}
		bad := o.DeepCopy()
		bad.SetName(o.GetName() + "-invalid")
		rules, _, _ := unstructured.NestedSlice(bad.Object, "spec", "ingress")
		rules[0].(map[string]any)["from"] = []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/33"}}}
		if err := unstructured.SetNestedSlice(bad.Object, rules, "spec", "ingress"); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, bad, client.DryRunAll); !apierrors.IsInvalid(err) {
			t.Errorf("a NetworkPolicy with CIDR 10.0.0.0/33: got %v; want it refused as Invalid", err)
		}
	}
}
