package chart_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// vapCapability is what an API server serving ValidatingAdmissionPolicy in
// admissionregistration.k8s.io/v1 (Kubernetes 1.30+) adds to helm's
// Capabilities.APIVersions.
const vapCapability = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"

func requireHelm(t *testing.T) {
	t.Helper()
	if _, err := framework.HelmPath(); err != nil {
		if os.Getenv("LOCKGUARD_REQUIRE_KUBE") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

func render(t *testing.T, r framework.Release) []*unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r.KubeVersion == "" {
		r.KubeVersion = "1.37.2"
	}
	objs, err := framework.Render(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	if u == nil {
		t.Fatal("object not rendered")
	}
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return &out
}

func repoFile(t *testing.T, rel string) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, rel)
}

// readObjects reads a manifest of the repository.
func readObjects(t *testing.T, rel string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := framework.ReadObjects(repoFile(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestRenderedObjects checks which objects each configuration renders.
func TestRenderedObjects(t *testing.T) {
	requireHelm(t)
	common := []string{
		"ClusterRole/lockguard",
		"ClusterRole/lockguard-break-glass",
		"ClusterRole/lockguard-cluster-lock",
		"ClusterRole/lockguard-cluster-unlock",
		"ClusterRole/lockguard-edit",
		"ClusterRole/lockguard-unlock",
		"ClusterRole/lockguard-view",
		"ClusterRole/lockguard-metrics-reader",
		"ClusterRoleBinding/lockguard",
		"Deployment/lockguard",
		"PodDisruptionBudget/lockguard",
		"Role/lockguard-leader-election",
		"RoleBinding/lockguard-leader-election",
		"Service/lockguard-metrics",
		"Service/lockguard-webhook",
		"ServiceAccount/lockguard",
	}
	certManager := []string{
		"Certificate/lockguard-ca",
		"Certificate/lockguard-serving",
		"Issuer/lockguard-ca",
		"Issuer/lockguard-selfsigned",
	}
	webhook := []string{"FlowSchema/lockguard", "Pod/lockguard-test-webhook", "ValidatingWebhookConfiguration/lockguard"}
	policy := []string{
		"ValidatingAdmissionPolicy/lockguard-locked",
		"ValidatingAdmissionPolicyBinding/lockguard-locked",
	}
	// On 1.30+ the identity Leases' rule is a policy; before, an entry of
	// the webhook configuration (TestPeerLeasesRender).
	peerLeases := []string{
		"ValidatingAdmissionPolicy/lockguard-peer-leases",
		"ValidatingAdmissionPolicyBinding/lockguard-peer-leases",
	}
	// On 1.30+ the unlock permission is a policy; before, an entry of the
	// webhook configuration (TestUnlockRender).
	unlock := []string{
		"ValidatingAdmissionPolicy/lockguard-unlock",
		"ValidatingAdmissionPolicyBinding/lockguard-unlock",
		"ValidatingAdmissionPolicy/lockguard-cluster-unlock",
		"ValidatingAdmissionPolicyBinding/lockguard-cluster-unlock",
	}
	join := func(lists ...[]string) []string {
		out := slices.Concat(lists...)
		slices.Sort(out)
		return out
	}
	cases := map[string]struct {
		reason string
		r      framework.Release
		want   []string
	}{
		"Defaults": {
			reason: "webhook mode, certificates from cert-manager with the chart's own CA",
			want:   join(common, certManager, webhook),
		},
		"DefaultsOnPolicyCapableServer": {
			reason: "mode webhook never renders the policy",
			r:      framework.Release{APIVersions: []string{vapCapability}},
			want:   join(common, certManager, webhook, peerLeases, unlock),
		},
		"Policy": {
			reason: "mode policy renders the policy instead of the webhook; lockguard still runs to keep the annotation",
			r:      framework.Release{Set: []string{"mode=policy"}, APIVersions: []string{vapCapability}},
			want:   join(common, certManager, policy, unlock),
		},
		"Both": {
			reason: "mode both renders the webhook and the policy",
			r:      framework.Release{Set: []string{"mode=both"}, APIVersions: []string{vapCapability}},
			want:   join(common, certManager, webhook, policy, peerLeases, unlock),
		},
		"BothWithoutPolicyAPI": {
			reason: "mode both on an API server without admissionregistration.k8s.io/v1 policies keeps the webhook only",
			r:      framework.Release{Set: []string{"mode=both"}, KubeVersion: "1.29.15"},
			want:   join(common, certManager, webhook),
		},
		"NoUnlockPermission": {
			reason: "unlockPermission.enabled=false renders no unlock policy (the roles stay)",
			r:      framework.Release{Set: []string{"unlockPermission.enabled=false"}, APIVersions: []string{vapCapability}},
			want:   join(common, certManager, webhook, peerLeases),
		},
		"Disabled": {
			reason: "lockGuard.enabled=false renders nothing",
			r:      framework.Release{Set: []string{"lockGuard.enabled=false", "mode=both"}, APIVersions: []string{vapCapability}},
			want:   []string{},
		},
		"DisabledWithCRDs": {
			reason: "lockGuard.enabled=false still ships the CRD",
			r:      framework.Release{Set: []string{"lockGuard.enabled=false"}, IncludeCRDs: true},
			want: []string{"CustomResourceDefinition/clusterlocks.core.navique.com", "CustomResourceDefinition/lockexceptions.core.navique.com",
				"CustomResourceDefinition/locks.core.navique.com"},
		},
		"UserIssuer": {
			reason: "a user-named issuer replaces the chart's CA",
			r:      framework.Release{Set: []string{"certManager.issuerRef.name=corp-ca", "certManager.issuerRef.kind=ClusterIssuer"}},
			want:   join(common, []string{"Certificate/lockguard-serving"}, webhook),
		},
		"UserSecret": {
			reason: "without cert-manager the user's Secret is mounted, its CA goes into a ConfigMap for the replicas' mutual TLS, and nothing of cert-manager is rendered",
			r: framework.Release{Set: []string{"certManager.enabled=false", "webhook.tls.existingSecret=my-tls"},
				SetString: []string{"webhook.tls.caBundle=Y2E="}},
			want: join(common, webhook, []string{"ConfigMap/lockguard-peer-ca"}),
		},
		"NoMetrics": {
			reason: "metrics.enabled=false drops the metrics Service and reader role",
			r:      framework.Release{Set: []string{"metrics.enabled=false"}},
			want: join(slices.DeleteFunc(slices.Clone(common), func(s string) bool { return strings.Contains(s, "metrics") }),
				certManager, webhook),
		},
		"ServiceMonitor": {
			reason: "metrics.serviceMonitor.enabled adds a ServiceMonitor",
			r:      framework.Release{Set: []string{"metrics.serviceMonitor.enabled=true"}},
			want: join(common, certManager, webhook, []string{"ServiceMonitor/lockguard",
				"ServiceAccount/lockguard-metrics-scraper", "Secret/lockguard-metrics-scraper", "ClusterRoleBinding/lockguard-metrics-scraper"}),
		},
		"ServiceMonitorOwnToken": {
			reason: "with the user's token Secret, the chart creates no scraper identity",
			r:      framework.Release{Set: []string{"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.authorization.secretName=prom-token"}},
			want:   join(common, certManager, webhook, []string{"ServiceMonitor/lockguard"}),
		},
		"ServiceMonitorUserSecret": {
			reason: "without cert-manager, the CA of webhook.tls.caBundle goes into a ConfigMap for the ServiceMonitor",
			r: framework.Release{Set: []string{"metrics.serviceMonitor.enabled=true", "certManager.enabled=false", "webhook.tls.existingSecret=my-tls"},
				SetString: []string{"webhook.tls.caBundle=Y2E="}},
			want: join(common, webhook, []string{"ConfigMap/lockguard-peer-ca", "ServiceMonitor/lockguard", "ConfigMap/lockguard-metrics-ca",
				"ServiceAccount/lockguard-metrics-scraper", "Secret/lockguard-metrics-scraper", "ClusterRoleBinding/lockguard-metrics-scraper"}),
		},
		"Monitoring": {
			reason: "metrics.prometheusRule.enabled and metrics.dashboard.enabled add the alerts and the dashboard",
			r:      framework.Release{Set: []string{"metrics.prometheusRule.enabled=true", "metrics.dashboard.enabled=true"}},
			want:   join(common, certManager, webhook, []string{"ConfigMap/lockguard-dashboard", "PrometheusRule/lockguard"}),
		},
		"NoFlowControl": {
			reason: "flowControl.enabled=false drops the FlowSchema",
			r:      framework.Release{Set: []string{"flowControl.enabled=false"}},
			want:   join(common, certManager, []string{"Pod/lockguard-test-webhook", "ValidatingWebhookConfiguration/lockguard"}),
		},
		"NetworkPolicy": {
			reason: "networkPolicy.enabled adds a NetworkPolicy",
			r:      framework.Release{Set: append([]string{"networkPolicy.enabled=true"}, networkPolicySources...)},
			want:   join(common, certManager, webhook, []string{"NetworkPolicy/lockguard"}),
		},
		"SingleReplica": {
			reason: "no PodDisruptionBudget for a single replica (it would block node drains)",
			r:      framework.Release{Set: []string{"replicas=1"}},
			want: join(slices.DeleteFunc(slices.Clone(common), func(s string) bool { return strings.HasPrefix(s, "PodDisruptionBudget/") }),
				certManager, webhook),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := framework.Kinds(render(t, tc.r))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nhelm template: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestRenderRejects checks values the chart refuses, through
// values.schema.json or the templates.
func TestRenderRejects(t *testing.T) {
	requireHelm(t)
	cases := map[string]struct {
		reason string
		r      framework.Release
		want   string
	}{
		"Typo": {
			reason: "an unknown key fails instead of being ignored",
			r:      framework.Release{Set: []string{"replica=3"}},
			want:   "additional properties 'replica' not allowed",
		},
		"NestedTypo": {
			reason: "unknown keys are refused at every level",
			r:      framework.Release{Set: []string{"webhook.failurPolicy=Ignore"}},
			want:   "additional properties 'failurPolicy' not allowed",
		},
		"BufferedBytesZero": {
			reason: "webhook.maxBufferedBytes 0 would be the binary's default, not what the memory check counts",
			r:      framework.Release{Set: []string{"webhook.maxBufferedBytes=0Mi"}},
			want:   "at '/webhook/maxBufferedBytes': '0Mi' does not match pattern",
		},
		"SizingNegative": {
			reason: "sizing.locks is a count",
			r:      framework.Release{Set: []string{"sizing.locks=-1"}},
			want:   "at '/sizing/locks': minimum: got -1, want 0",
		},
		"Mode": {
			reason: "mode is webhook, policy or both",
			r:      framework.Release{Set: []string{"mode=webhooks"}},
			want:   "value must be one of 'webhook', 'policy', 'both'",
		},
		"CascadeMode": {
			reason: "guards.cascade is Deny, Warn or Off, spelled as lockguard's --cascade-guard takes it",
			r:      framework.Release{Set: []string{"guards.cascade=deny"}},
			want:   "value must be one of 'Deny', 'Warn', 'Off'",
		},
		"FailurePolicy": {
			reason: "failurePolicy is Fail or Ignore",
			r:      framework.Release{Set: []string{"webhook.failurePolicy=Deny"}},
			want:   "value must be one of 'Fail', 'Ignore'",
		},
		"Timeout": {
			reason: "the API server allows 1 to 30 seconds",
			r:      framework.Release{Set: []string{"webhook.timeoutSeconds=31"}},
			want:   "maximum: got 31, want 30",
		},
		"Replicas": {
			reason: "replicas is a non-negative integer",
			r:      framework.Release{Set: []string{"replicas=two"}},
			want:   "/replicas",
		},
		"FlowSchemaPrecedence": {
			reason: "the API server allows matchingPrecedence 1 to 10000",
			r:      framework.Release{Set: []string{"flowControl.matchingPrecedence=0"}},
			want:   "minimum: got 0, want 1",
		},
		"NoCertificate": {
			reason: "without cert-manager a Secret must be named",
			r:      framework.Release{Set: []string{"certManager.enabled=false"}},
			want:   "/webhook/tls/existingSecret",
		},
		"NoCABundle": {
			reason: "without cert-manager the webhook needs the CA of the Secret",
			r:      framework.Release{Set: []string{"certManager.enabled=false", "webhook.tls.existingSecret=my-tls"}},
			want:   "webhook.tls.caBundle",
		},
		"PolicyWithoutPolicyAPI": {
			reason: "mode policy alone would enforce nothing on an API server without admissionregistration.k8s.io/v1 policies",
			r:      framework.Release{Set: []string{"mode=policy"}},
			want:   "mode=policy needs ValidatingAdmissionPolicy in admissionregistration.k8s.io/v1",
		},
		"NetworkPolicyWithoutSources": {
			reason: "a NetworkPolicy that admits the API server from nowhere would make every delete fail closed",
			r:      framework.Release{Set: []string{"networkPolicy.enabled=true"}},
			want:   "networkPolicy.webhook.from is required",
		},
		"NetworkPolicyPeerTypo": {
			reason: "a peer is an ipBlock, a namespaceSelector or a podSelector",
			r:      framework.Release{Set: []string{"networkPolicy.enabled=true", "networkPolicy.webhook.from[0].ipblock.cidr=10.0.0.0/8"}},
			want:   "additional properties 'ipblock' not allowed",
		},
		"OldKubernetes": {
			reason: "webhook matchConditions need Kubernetes 1.28",
			r:      framework.Release{KubeVersion: "1.27.9"},
			want:   "chart requires kubeVersion: >=1.28.0-0",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if tc.r.KubeVersion == "" {
				tc.r.KubeVersion = "1.37.2"
			}
			_, err := framework.Render(ctx, tc.r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nhelm template: got error %v, want one containing %q", tc.reason, err, tc.want)
			}
		})
	}
}

// TestWebhookConfiguration checks the values that change the chart's webhook
// configuration. It is the only copy of it: the behaviour tests install it
// too, pointed at a local URL (framework.LocalWebhook.InstallChart).
func TestWebhookConfiguration(t *testing.T) {
	requireHelm(t)
	got := convert[admissionregistrationv1.ValidatingWebhookConfiguration](t,
		framework.Find(render(t, framework.Release{Name: "guard", Namespace: "ops", Set: []string{
			"webhook.failurePolicy=Ignore", "webhook.timeoutSeconds=3", "webhook.servicePort=8443",
		}}), "ValidatingWebhookConfiguration", "guard-lockguard"))
	wh := got.Webhooks[0]
	if *wh.FailurePolicy != admissionregistrationv1.Ignore || *wh.TimeoutSeconds != 3 {
		t.Errorf("failurePolicy, timeoutSeconds = %s, %d; want Ignore, 3", *wh.FailurePolicy, *wh.TimeoutSeconds)
	}
	// A real denial records Events; a dry-run one records nothing.
	if wh.SideEffects == nil || *wh.SideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun {
		t.Errorf("sideEffects = %v; want NoneOnDryRun (real denials record Events)", wh.SideEffects)
	}
	svc := wh.ClientConfig.Service
	if svc.Name != "guard-lockguard-webhook" || svc.Namespace != "ops" || *svc.Port != 8443 {
		t.Errorf("clientConfig.service = %s/%s:%d; want ops/guard-lockguard-webhook:8443", svc.Namespace, svc.Name, *svc.Port)
	}
	if a := got.Annotations["cert-manager.io/inject-ca-from"]; a != "ops/guard-lockguard-serving" {
		t.Errorf("cert-manager.io/inject-ca-from = %q; want ops/guard-lockguard-serving", a)
	}
	// Break-glass (docs/contract.md rule 20): lockguard admits every
	// LockException create, failing closed whatever webhook.failurePolicy
	// says.
	i := slices.IndexFunc(got.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
		return w.Name == "exception.lockguard.core.navique.com"
	})
	if i < 0 {
		t.Fatal("no exception.lockguard.core.navique.com entry")
	}
	x := got.Webhooks[i]
	wantRules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"core.navique.com"}, APIVersions: []string{"*"}, Resources: []string{"lockexceptions"}, Scope: new(admissionregistrationv1.NamespacedScope)}}}
	switch {
	case *x.FailurePolicy != admissionregistrationv1.Fail || *x.SideEffects != admissionregistrationv1.SideEffectClassNone:
		t.Errorf("exception entry: failurePolicy %s, sideEffects %s; want Fail, None", *x.FailurePolicy, *x.SideEffects)
	case x.ClientConfig.Service == nil || *x.ClientConfig.Service.Path != webhook.ExceptionPath:
		t.Errorf("exception entry: clientConfig %+v; want the path %s", x.ClientConfig, webhook.ExceptionPath)
	case !cmp.Equal(x.Rules, wantRules):
		t.Errorf("exception entry rules: %s", cmp.Diff(wantRules, x.Rules))
	}
}
