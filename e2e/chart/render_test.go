package chart_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/navique/lockguard/e2e/framework"
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
			want:   join(common, certManager, webhook, peerLeases),
		},
		"Policy": {
			reason: "mode policy renders the policy instead of the webhook; lockguard still runs to keep the annotation",
			r:      framework.Release{Set: []string{"mode=policy"}, APIVersions: []string{vapCapability}},
			want:   join(common, certManager, policy),
		},
		"Both": {
			reason: "mode both renders the webhook and the policy",
			r:      framework.Release{Set: []string{"mode=both"}, APIVersions: []string{vapCapability}},
			want:   join(common, certManager, webhook, policy, peerLeases),
		},
		"BothWithoutPolicyAPI": {
			reason: "mode both on an API server without admissionregistration.k8s.io/v1 policies keeps the webhook only",
			r:      framework.Release{Set: []string{"mode=both"}, KubeVersion: "1.29.15"},
			want:   join(common, certManager, webhook),
		},
		"Disabled": {
			reason: "lockGuard.enabled=false renders nothing",
			r:      framework.Release{Set: []string{"lockGuard.enabled=false", "mode=both"}, APIVersions: []string{vapCapability}},
			want:   []string{},
		},
		"DisabledWithCRDs": {
			reason: "lockGuard.enabled=false still ships the CRD",
			r:      framework.Release{Set: []string{"lockGuard.enabled=false"}, IncludeCRDs: true},
			want:   []string{"CustomResourceDefinition/locks.core.navique.com"},
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
}

// TestDeployment checks the pod: availability, probes, flags, hardening and
// the certificate volume.
func TestDeployment(t *testing.T) {
	requireHelm(t)
	objs := render(t, framework.Release{})
	d := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "lockguard"))
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %d; want 2", *d.Spec.Replicas)
	}
	ru := d.Spec.Strategy.RollingUpdate
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("strategy = %+v; want RollingUpdate with maxUnavailable 0", d.Spec.Strategy)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers; want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	flags := map[string]string{}
	for _, a := range c.Args {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		flags[k] = v
	}
	wantFlags := map[string]string{
		"leader-elect":              "true",
		"leader-election-namespace": "lockguard-system",
		"webhook-port":              "9443",
		"cert-dir":                  "/tmp/k8s-webhook-server/serving-certs",
		// One address holds at most half of the webhook's connections.
		"webhook-max-connections-per-source": "512",
		// One address has at most half of the requests served at once.
		"webhook-max-in-flight-per-source": "256",
		"health-probe-bind-address":        ":8081",
		"metrics-bind-address":             ":8443",
		"metrics-secure":                   "true",
		"metrics-cert-dir":                 "/tmp/k8s-webhook-server/serving-certs",
		"shutdown-delay":                   "10s",
		"cascade-guard":                    "Deny",
		// The chart's default exempt principal of ReadOnly Locks.
		"read-only-exempt": "system:serviceaccount:navique-system:navique-operator",
		// The other replicas: the webhook Service's endpoints, verified
		// for its DNS name (with POD_IP, below).
		"peer-service":     "lockguard-webhook",
		"peer-server-name": "lockguard-webhook.lockguard-system.svc",
		// The webhook configuration whose Lock-create entry must call
		// that Service at that port for a replica to be warm.
		"webhook-configuration": "lockguard",
		"webhook-service-port":  "443",
	}
	if diff := cmp.Diff(wantFlags, flags); diff != "" {
		t.Errorf("lockguard flags: -want, +got:\n%s", diff)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "POD_IP" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("env = %+v; want POD_IP from status.podIP (this replica's address among its peers)", c.Env)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if diff := cmp.Diff(map[string]int32{"webhook": 9443, "healthz": 8081, "metrics": 8443}, ports); diff != "" {
		t.Errorf("container ports: -want, +got:\n%s", diff)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "healthz" {
		t.Errorf("readinessProbe = %+v; want GET /readyz on the healthz port (--health-probe-bind-address)", p)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("livenessProbe = %+v; want GET /healthz", p)
	}
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds < 40 {
		t.Errorf("terminationGracePeriodSeconds = %v; want room for the 10s shutdown delay and the 30s graceful shutdown", pod.TerminationGracePeriodSeconds)
	}

	// The serving certificate: the Secret of the Certificate, mounted
	// without subPath at --cert-dir.
	if len(c.VolumeMounts) != 1 {
		t.Fatalf("volumeMounts = %+v; want the certificate only", c.VolumeMounts)
	}
	m := c.VolumeMounts[0]
	if m.MountPath != flags["cert-dir"] || m.SubPath != "" || m.SubPathExpr != "" || !m.ReadOnly {
		t.Errorf("volumeMount = %+v; want read-only at %s without subPath", m, flags["cert-dir"])
	}
	cert := framework.Find(objs, "Certificate", "lockguard-serving")
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	if len(pod.Volumes) != 1 || pod.Volumes[0].Name != m.Name || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != secretName {
		t.Errorf("volumes = %+v; want Secret %s (the serving Certificate's) as %s", pod.Volumes, secretName, m.Name)
	}

	// Restricted Pod Security Standard (also enforced for real by the
	// install test).
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext = %+v; want the restricted profile", sc)
	}
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("pod securityContext = %+v; want runAsNonRoot as 65532 (distroless nonroot)", psc)
	}

	// Topology spread by default, selecting the release's pods.
	if len(pod.TopologySpreadConstraints) != 2 {
		t.Fatalf("topologySpreadConstraints = %+v; want hostname and zone", pod.TopologySpreadConstraints)
	}
	for _, tsc := range pod.TopologySpreadConstraints {
		if tsc.LabelSelector == nil || !cmp.Equal(tsc.LabelSelector.MatchLabels, d.Spec.Selector.MatchLabels) {
			t.Errorf("topology spread %s selects %+v; want the Deployment's selector %v", tsc.TopologyKey, tsc.LabelSelector, d.Spec.Selector.MatchLabels)
		}
	}

	// The Services reach the named container ports.
	for name, port := range map[string]string{"lockguard-webhook": "webhook", "lockguard-metrics": "metrics"} {
		svc := convert[corev1.Service](t, framework.Find(objs, "Service", name))
		if !cmp.Equal(svc.Spec.Selector, d.Spec.Selector.MatchLabels) || svc.Spec.Ports[0].TargetPort.String() != port {
			t.Errorf("Service %s: selector %v, targetPort %s; want %v, %s", name, svc.Spec.Selector, svc.Spec.Ports[0].TargetPort.String(), d.Spec.Selector.MatchLabels, port)
		}
	}
}

// TestPlacementAndMetadata checks the values that reach the pod spec and the
// objects' metadata.
func TestPlacementAndMetadata(t *testing.T) {
	requireHelm(t)
	objs := render(t, framework.Release{
		Set: []string{
			"replicas=3",
			"nodeSelector.pool=system",
			"tolerations[0].key=dedicated", "tolerations[0].operator=Exists", "tolerations[0].effect=NoSchedule",
			"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=arch",
			"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=In",
			"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0]=arm64",
			"topologySpreadConstraints[0].maxSkew=2",
			"topologySpreadConstraints[0].topologyKey=example.com/rack",
			"topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
			"priorityClassName=system-cluster-critical",
			"commonLabels.team=platform",
			"commonAnnotations.owner=ops",
			"podLabels.tier=guard",
			"podAnnotations.scrape=no",
			"image.repository=registry.example/lockguard", "image.tag=v9",
			"extraArgs[0]=--zap-log-level=debug",
		},
	})
	d := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "lockguard"))
	pod := d.Spec.Template.Spec
	if *d.Spec.Replicas != 3 || pod.NodeSelector["pool"] != "system" || len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "dedicated" ||
		pod.Affinity == nil || pod.Affinity.NodeAffinity == nil || pod.PriorityClassName != "system-cluster-critical" {
		t.Errorf("pod spec does not carry the values: replicas %d, %+v", *d.Spec.Replicas, pod)
	}
	if len(pod.TopologySpreadConstraints) != 1 || pod.TopologySpreadConstraints[0].TopologyKey != "example.com/rack" ||
		pod.TopologySpreadConstraints[0].LabelSelector == nil {
		t.Errorf("topologySpreadConstraints = %+v; want the one given, with the release's selector", pod.TopologySpreadConstraints)
	}
	if c := pod.Containers[0]; c.Image != "registry.example/lockguard:v9" || !slices.Contains(c.Args, "--zap-log-level=debug") {
		t.Errorf("image %s, args %v; want registry.example/lockguard:v9 and --zap-log-level=debug", c.Image, c.Args)
	}
	tmpl := d.Spec.Template.ObjectMeta
	if tmpl.Labels["tier"] != "guard" || tmpl.Labels["team"] != "platform" || tmpl.Annotations["scrape"] != "no" {
		t.Errorf("pod template metadata = %+v; want podLabels, commonLabels and podAnnotations", tmpl)
	}
	for _, o := range objs {
		if o.GetLabels()["team"] != "platform" || o.GetAnnotations()["owner"] != "ops" {
			t.Errorf("%s %s: labels %v, annotations %v; want commonLabels and commonAnnotations", o.GetKind(), o.GetName(), o.GetLabels(), o.GetAnnotations())
		}
	}
	vwc := framework.Find(objs, "ValidatingWebhookConfiguration", "lockguard")
	if vwc.GetAnnotations()["cert-manager.io/inject-ca-from"] == "" {
		t.Error("commonAnnotations replaced cert-manager.io/inject-ca-from; want both")
	}
}

// TestCertificates checks the cert-manager objects: the chart's CA chain and
// an ECDSA P-256 serving certificate for the webhook Service's names.
func TestCertificates(t *testing.T) {
	requireHelm(t)
	objs := render(t, framework.Release{})
	str := func(o *unstructured.Unstructured, path ...string) string {
		t.Helper()
		if o == nil {
			t.Fatalf("object for %v not rendered", path)
		}
		s, _, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
		v, _ := s.(string)
		return v
	}
	selfSigned := framework.Find(objs, "Issuer", "lockguard-selfsigned")
	if _, ok, _ := unstructured.NestedMap(selfSigned.Object, "spec", "selfSigned"); !ok {
		t.Error("Issuer lockguard-selfsigned is not a SelfSigned issuer")
	}
	ca := framework.Find(objs, "Certificate", "lockguard-ca")
	if isCA, _, _ := unstructured.NestedBool(ca.Object, "spec", "isCA"); !isCA || str(ca, "spec", "issuerRef", "name") != "lockguard-selfsigned" {
		t.Errorf("Certificate lockguard-ca = %v; want a CA signed by lockguard-selfsigned", ca.Object["spec"])
	}
	caIssuer := framework.Find(objs, "Issuer", "lockguard-ca")
	if str(caIssuer, "spec", "ca", "secretName") != str(ca, "spec", "secretName") {
		t.Errorf("Issuer lockguard-ca does not use the CA Certificate's Secret %s", str(ca, "spec", "secretName"))
	}
	serving := framework.Find(objs, "Certificate", "lockguard-serving")
	if str(serving, "spec", "issuerRef", "name") != "lockguard-ca" || str(serving, "spec", "issuerRef", "kind") != "Issuer" {
		t.Errorf("serving certificate issuerRef = %v; want Issuer lockguard-ca", serving.Object["spec"])
	}
	if str(serving, "spec", "privateKey", "algorithm") != "ECDSA" {
		t.Errorf("serving key algorithm %q; want ECDSA", str(serving, "spec", "privateKey", "algorithm"))
	}
	if size, _, _ := unstructured.NestedFieldNoCopy(serving.Object, "spec", "privateKey", "size"); size != int64(256) && size != float64(256) {
		t.Errorf("serving key size %v; want 256 (P-256)", size)
	}
	dns, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "dnsNames")
	if !slices.Contains(dns, "lockguard-webhook.lockguard-system.svc") {
		t.Errorf("dnsNames = %v; want lockguard-webhook.lockguard-system.svc, the name the API server verifies", dns)
	}
	if usages, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "usages"); !slices.Contains(usages, "server auth") || !slices.Contains(usages, "client auth") {
		t.Errorf("usages = %v; want server auth and client auth (the replicas present it to each other)", usages)
	}

	// A user-named issuer.
	objs = render(t, framework.Release{Set: []string{"certManager.issuerRef.name=corp-ca", "certManager.issuerRef.kind=ClusterIssuer"}})
	serving = framework.Find(objs, "Certificate", "lockguard-serving")
	if str(serving, "spec", "issuerRef", "name") != "corp-ca" || str(serving, "spec", "issuerRef", "kind") != "ClusterIssuer" {
		t.Errorf("serving certificate issuerRef = %v; want ClusterIssuer corp-ca", serving.Object["spec"])
	}

	// A user-provided Secret, no cert-manager.
	objs = render(t, framework.Release{Set: []string{"certManager.enabled=false", "webhook.tls.existingSecret=my-tls"},
		SetString: []string{"webhook.tls.caBundle=Y2E="}})
	vwc := convert[admissionregistrationv1.ValidatingWebhookConfiguration](t, framework.Find(objs, "ValidatingWebhookConfiguration", "lockguard"))
	if string(vwc.Webhooks[0].ClientConfig.CABundle) != "ca" || vwc.Annotations["cert-manager.io/inject-ca-from"] != "" {
		t.Errorf("webhook caBundle %q, annotations %v; want the given CA and no cert-manager annotation", vwc.Webhooks[0].ClientConfig.CABundle, vwc.Annotations)
	}
	d := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "lockguard"))
	if v := d.Spec.Template.Spec.Volumes[0]; v.Secret == nil || v.Secret.SecretName != "my-tls" {
		t.Errorf("certificate volume = %+v; want Secret my-tls", v)
	}
}

// TestRBACFromMarkers checks that the chart grants exactly the rules that
// controller-gen generated into its files/rbac/role.yaml, to the release's
// ServiceAccount.
func TestRBACFromMarkers(t *testing.T) {
	requireHelm(t)
	objs := render(t, framework.Release{Name: "guard", Namespace: "ops"})
	var wantCluster, wantNamespaced []rbacv1.PolicyRule
	for _, o := range readObjects(t, "deploy/chart/lockguard/files/rbac/role.yaml") {
		switch o.GetKind() {
		case "ClusterRole":
			wantCluster = append(wantCluster, convert[rbacv1.ClusterRole](t, o).Rules...)
		case "Role":
			wantNamespaced = append(wantNamespaced, convert[rbacv1.Role](t, o).Rules...)
		}
	}
	// The chart narrows the rule on webhook configurations to the
	// release's own (list and watch by a metadata.name field selector).
	for i, r := range wantCluster {
		if slices.Contains(r.Resources, "validatingwebhookconfigurations") {
			wantCluster[i].ResourceNames = []string{"guard-lockguard"}
		}
	}
	cr := convert[rbacv1.ClusterRole](t, framework.Find(objs, "ClusterRole", "guard-lockguard"))
	if diff := cmp.Diff(wantCluster, cr.Rules); diff != "" {
		t.Errorf("ClusterRole rules differ from files/rbac/role.yaml: -want, +got:\n%s", diff)
	}
	role := convert[rbacv1.Role](t, framework.Find(objs, "Role", "guard-lockguard-leader-election"))
	if diff := cmp.Diff(wantNamespaced, role.Rules); diff != "" {
		t.Errorf("Role rules differ from files/rbac/role.yaml: -want, +got:\n%s", diff)
	}
	if role.Namespace != "ops" {
		t.Errorf("Role namespace %s; want the release's, ops", role.Namespace)
	}
	wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "guard-lockguard", Namespace: "ops"}}
	crb := convert[rbacv1.ClusterRoleBinding](t, framework.Find(objs, "ClusterRoleBinding", "guard-lockguard"))
	rb := convert[rbacv1.RoleBinding](t, framework.Find(objs, "RoleBinding", "guard-lockguard-leader-election"))
	for _, got := range [][]rbacv1.Subject{crb.Subjects, rb.Subjects} {
		if diff := cmp.Diff(wantSubject, got); diff != "" {
			t.Errorf("binding subjects: -want, +got:\n%s", diff)
		}
	}
	for _, r := range slices.Concat(cr.Rules, role.Rules) {
		if slices.Contains(r.Resources, "secrets") {
			t.Errorf("rule %+v grants Secrets; lockguard reads its certificate from a volume", r)
		}
	}
}

// TestPlainManifest checks that deploy/lockguard.yaml is current: the chart
// with its default values, plus the namespace (make chart writes it; make
// verify-generated fails on a stale one too).
func TestPlainManifest(t *testing.T) {
	requireHelm(t)
	plain := readObjects(t, "deploy/lockguard.yaml")
	// Without helm's test hooks: kubectl apply users have no helm test.
	want := slices.DeleteFunc(render(t, framework.Release{IncludeCRDs: true}), func(o *unstructured.Unstructured) bool {
		return o.GetAnnotations()["helm.sh/hook"] == "test"
	})
	wantKinds := append(framework.Kinds(want), "Namespace/lockguard-system")
	slices.Sort(wantKinds)
	if diff := cmp.Diff(wantKinds, framework.Kinds(plain)); diff != "" {
		t.Errorf("deploy/lockguard.yaml objects: -want, +got:\n%s", diff)
	}
	for _, w := range want {
		g := framework.Find(plain, w.GetKind(), w.GetName())
		if g == nil {
			continue
		}
		if diff := cmp.Diff(w.Object, g.Object); diff != "" {
			t.Errorf("deploy/lockguard.yaml: %s %s is stale (run make chart): -chart, +file:\n%s", w.GetKind(), w.GetName(), diff)
		}
	}
}

// TestLint runs helm lint --strict for each mode.
func TestLint(t *testing.T) {
	requireHelm(t)
	for _, set := range [][]string{
		nil,
		{"mode=both"},
		{"lockGuard.enabled=false"},
		{"metrics.serviceMonitor.enabled=true"},
		append([]string{"networkPolicy.enabled=true"}, networkPolicySources...),
		{"certManager.enabled=false", "webhook.tls.existingSecret=my-tls", "webhook.tls.caBundle=Y2E="},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := framework.Lint(ctx, framework.Release{KubeVersion: "1.37.2", Set: set})
		cancel()
		if err != nil {
			t.Errorf("helm lint --strict %v: %v\n%s", set, err, out)
		}
	}
}

// TestSubchart renders lockguard as the dependency of a parent chart, as
// umbrella charts use it: helm passes the parent's global values to it,
// which the strict schema must accept, and the parent's lockguard values
// reach it, still checked by the schema.
func TestSubchart(t *testing.T) {
	requireHelm(t)
	chart, err := framework.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	if err := os.CopyFS(filepath.Join(parent, "charts", "lockguard"), os.DirFS(chart)); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"Chart.yaml": `apiVersion: v2
name: platform
version: 1.0.0
dependencies:
  - name: lockguard
    version: "*"
`,
		"values.yaml": `global:
  imageRegistry: registry.example
  labels:
    team: platform
lockguard:
  replicas: 3
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(parent, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	template := func(set ...string) ([]*unstructured.Unstructured, error) {
		args := []string{"template", "platform", parent, "--namespace", "ops", "--kube-version", "1.37.2"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		out, err := framework.Helm(ctx, args...)
		if err != nil {
			return nil, err
		}
		return framework.Decode(out)
	}

	objs, err := template("global.extra.nested=true")
	if err != nil {
		t.Fatalf("helm template of a parent chart with global values: %v", err)
	}
	d := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "platform-lockguard"))
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %d; want 3, the parent's lockguard.replicas", *d.Spec.Replicas)
	}
	if framework.Find(objs, "ValidatingWebhookConfiguration", "platform-lockguard") == nil {
		t.Errorf("no webhook configuration rendered in the parent chart: %v", framework.Kinds(objs))
	}

	// The schema still checks the subchart's own values.
	_, err = template("lockguard.replica=1")
	if err == nil || !strings.Contains(err.Error(), "additional properties 'replica' not allowed") {
		t.Errorf("a typo in the parent's lockguard values: got %v; want the schema to refuse it", err)
	}
}

// TestServiceMonitor checks how the ServiceMonitor scrapes lockguard: over
// TLS verified against the serving certificate's CA for a name the
// certificate holds (lockguard serves metrics with the webhook's
// certificate), and with prometheus-operator's authorization field and a
// token of an identity allowed to get /metrics, not the deprecated
// bearerTokenFile or insecureSkipVerify.
func TestServiceMonitor(t *testing.T) {
	requireHelm(t)
	endpoint := func(objs []*unstructured.Unstructured) map[string]any {
		t.Helper()
		sm := framework.Find(objs, "ServiceMonitor", "guard-lockguard")
		if sm == nil {
			t.Fatalf("no ServiceMonitor guard-lockguard in %v", framework.Kinds(objs))
		}
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(eps) != 1 {
			t.Fatalf("ServiceMonitor endpoints = %v; want one", eps)
		}
		ep := eps[0].(map[string]any)
		for _, deprecated := range []string{"bearerTokenFile", "bearerTokenSecret"} {
			if _, ok := ep[deprecated]; ok {
				t.Errorf("the endpoint sets the deprecated %s", deprecated)
			}
		}
		return ep
	}
	str := func(m map[string]any, path ...string) string {
		t.Helper()
		v, _, err := unstructured.NestedString(m, path...)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	objs := render(t, framework.Release{Name: "guard", Namespace: "ops", Set: []string{"metrics.serviceMonitor.enabled=true"}})
	ep := endpoint(objs)
	serving := framework.Find(objs, "Certificate", "guard-lockguard-serving")
	secretName, _, _ := unstructured.NestedString(serving.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "dnsNames")
	wantTLS := map[string]any{
		"ca":         map[string]any{"secret": map[string]any{"name": secretName, "key": "ca.crt"}},
		"serverName": "guard-lockguard-webhook.ops.svc",
	}
	if diff := cmp.Diff(wantTLS, ep["tlsConfig"]); diff != "" {
		t.Errorf("tlsConfig: -want, +got:\n%s", diff)
	}
	if !slices.Contains(dnsNames, str(ep, "tlsConfig", "serverName")) {
		t.Errorf("serverName %s is not one of the serving certificate's dnsNames %v", str(ep, "tlsConfig", "serverName"), dnsNames)
	}
	d := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "guard-lockguard"))
	if mount := d.Spec.Template.Spec.Containers[0].VolumeMounts[0]; !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--metrics-cert-dir="+mount.MountPath) ||
		d.Spec.Template.Spec.Volumes[0].Secret.SecretName != secretName {
		t.Errorf("lockguard args %v: want --metrics-cert-dir at the mount of Secret %s", d.Spec.Template.Spec.Containers[0].Args, secretName)
	}
	wantAuth := map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "guard-lockguard-metrics-scraper", "key": "token"}}
	if diff := cmp.Diff(wantAuth, ep["authorization"]); diff != "" {
		t.Errorf("authorization: -want, +got:\n%s", diff)
	}
	token := convert[corev1.Secret](t, framework.Find(objs, "Secret", "guard-lockguard-metrics-scraper"))
	if token.Type != corev1.SecretTypeServiceAccountToken || token.Annotations[corev1.ServiceAccountNameKey] != "guard-lockguard-metrics-scraper" {
		t.Errorf("token Secret: type %s, annotations %v; want a service-account-token of guard-lockguard-metrics-scraper", token.Type, token.Annotations)
	}
	crb := convert[rbacv1.ClusterRoleBinding](t, framework.Find(objs, "ClusterRoleBinding", "guard-lockguard-metrics-scraper"))
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "guard-lockguard-metrics-scraper", Namespace: "ops"}}
	if crb.RoleRef.Name != "guard-lockguard-metrics-reader" || !cmp.Equal(wantSubjects, crb.Subjects) {
		t.Errorf("scraper binding: roleRef %v, subjects %v; want guard-lockguard-metrics-reader for %v", crb.RoleRef, crb.Subjects, wantSubjects)
	}

	// Without cert-manager: the CA of webhook.tls.caBundle, in a ConfigMap.
	const caPEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	objs = render(t, framework.Release{Name: "guard", Namespace: "ops",
		Set:       []string{"metrics.serviceMonitor.enabled=true", "certManager.enabled=false", "webhook.tls.existingSecret=my-tls"},
		SetString: []string{"webhook.tls.caBundle=" + base64.StdEncoding.EncodeToString([]byte(caPEM))}})
	ep = endpoint(objs)
	if got := str(ep, "tlsConfig", "ca", "configMap", "name"); got != "guard-lockguard-metrics-ca" || str(ep, "tlsConfig", "ca", "configMap", "key") != "ca.crt" {
		t.Errorf("tlsConfig.ca = %v; want ConfigMap guard-lockguard-metrics-ca key ca.crt", ep["tlsConfig"])
	}
	cm := convert[corev1.ConfigMap](t, framework.Find(objs, "ConfigMap", "guard-lockguard-metrics-ca"))
	if cm.Data["ca.crt"] != caPEM {
		t.Errorf("ConfigMap ca.crt = %q; want the decoded webhook.tls.caBundle %q", cm.Data["ca.crt"], caPEM)
	}
	// The same CA authenticates the replicas to each other.
	peerCA := convert[corev1.ConfigMap](t, framework.Find(objs, "ConfigMap", "guard-lockguard-peer-ca"))
	if peerCA.Data["ca.crt"] != caPEM {
		t.Errorf("peer CA ConfigMap ca.crt = %q; want the decoded webhook.tls.caBundle %q", peerCA.Data["ca.crt"], caPEM)
	}
	dep := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "guard-lockguard"))
	if args := dep.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--peer-ca-file=/etc/lockguard/peer-ca/ca.crt") {
		t.Errorf("lockguard args %v; want --peer-ca-file=/etc/lockguard/peer-ca/ca.crt", args)
	}
	if vols := dep.Spec.Template.Spec.Volumes; !slices.ContainsFunc(vols, func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == "guard-lockguard-peer-ca"
	}) {
		t.Errorf("volumes %+v; want the ConfigMap guard-lockguard-peer-ca", vols)
	}

	// The user's TLS settings and token replace the chart's.
	objs = render(t, framework.Release{Name: "guard", Namespace: "ops", Set: []string{"metrics.serviceMonitor.enabled=true",
		"metrics.serviceMonitor.tlsConfig.serverName=metrics.example", "metrics.serviceMonitor.tlsConfig.ca.secret.name=corp-ca",
		"metrics.serviceMonitor.tlsConfig.ca.secret.key=bundle.pem",
		"metrics.serviceMonitor.authorization.secretName=prom-token", "metrics.serviceMonitor.authorization.key=jwt"}})
	ep = endpoint(objs)
	wantTLS = map[string]any{"ca": map[string]any{"secret": map[string]any{"name": "corp-ca", "key": "bundle.pem"}}, "serverName": "metrics.example"}
	if diff := cmp.Diff(wantTLS, ep["tlsConfig"]); diff != "" {
		t.Errorf("user tlsConfig: -want, +got:\n%s", diff)
	}
	if str(ep, "authorization", "credentials", "name") != "prom-token" || str(ep, "authorization", "credentials", "key") != "jwt" {
		t.Errorf("authorization = %v; want the user's Secret prom-token, key jwt", ep["authorization"])
	}
}

// networkPolicySources are values that admit the webhook port from the
// control plane's addresses and konnectivity agents, and the metrics port
// from the monitoring namespace.
var networkPolicySources = []string{
	"networkPolicy.webhook.from[0].ipBlock.cidr=10.0.0.0/24",
	"networkPolicy.webhook.from[1].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=kube-system",
	"networkPolicy.webhook.from[1].podSelector.matchLabels.k8s-app=konnectivity-agent",
	"networkPolicy.metrics.from[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring",
}

// TestNetworkPolicy checks the optional NetworkPolicy: it selects
// lockguard's pods and admits their webhook port only from the sources the
// values give for the API server, their metrics port only from the
// scrapers' sources, and nothing else.
func TestNetworkPolicy(t *testing.T) {
	requireHelm(t)
	if objs := render(t, framework.Release{}); framework.Find(objs, "NetworkPolicy", "lockguard") != nil {
		t.Errorf("a NetworkPolicy is rendered by default; want it off by default")
	}
	objs := render(t, framework.Release{Set: append([]string{"networkPolicy.enabled=true", "webhook.port=9444", "metrics.port=8444"}, networkPolicySources...)})
	np := convert[networkingv1.NetworkPolicy](t, framework.Find(objs, "NetworkPolicy", "lockguard"))
	d := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "lockguard"))
	testPod := convert[corev1.Pod](t, framework.Find(objs, "Pod", "lockguard-test-webhook"))
	testPodSelector := map[string]string{"app.kubernetes.io/name": "lockguard-test", "app.kubernetes.io/instance": "lockguard"}
	if sel, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: testPodSelector}); err != nil || !sel.Matches(labels.Set(testPod.Labels)) {
		t.Errorf("the helm test Pod's labels %v do not match %v: the NetworkPolicy would keep it from the webhook", testPod.Labels, testPodSelector)
	}
	if !cmp.Equal(np.Spec.PodSelector.MatchLabels, d.Spec.Selector.MatchLabels) || len(np.Spec.PodSelector.MatchExpressions) != 0 {
		t.Errorf("podSelector = %+v; want the Deployment's selector %v", np.Spec.PodSelector, d.Spec.Selector.MatchLabels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes = %v; want Ingress only (lockguard must reach the API server)", np.Spec.PolicyTypes)
	}
	containerPorts := map[string]int32{}
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		containerPorts[p.Name] = p.ContainerPort
	}
	tcp := corev1.ProtocolTCP
	port := func(name string) []networkingv1.NetworkPolicyPort {
		p := intstr.FromInt32(containerPorts[name])
		return []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}}
	}
	want := []networkingv1.NetworkPolicyIngressRule{
		{Ports: port("webhook"), From: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/24"}},
			{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "konnectivity-agent"}},
			},
			{PodSelector: &metav1.LabelSelector{MatchLabels: testPodSelector}},
			// The other replicas (the peer protocol, internal/peers).
			{PodSelector: &metav1.LabelSelector{MatchLabels: d.Spec.Selector.MatchLabels}},
		}},
		{Ports: port("metrics"), From: []networkingv1.NetworkPolicyPeer{
			{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}},
		}},
	}
	if diff := cmp.Diff(want, np.Spec.Ingress); diff != "" {
		t.Errorf("ingress rules: -want, +got:\n%s", diff)
	}
	if containerPorts["webhook"] != 9444 || containerPorts["metrics"] != 8444 {
		t.Errorf("container ports %v; want webhook 9444 and metrics 8444 from the values", containerPorts)
	}

	// Without metrics sources, or without metrics, the metrics port is
	// not admitted at all.
	for _, set := range [][]string{
		{"networkPolicy.enabled=true", networkPolicySources[0]},
		append([]string{"networkPolicy.enabled=true", "metrics.enabled=false"}, networkPolicySources...),
	} {
		np := convert[networkingv1.NetworkPolicy](t, framework.Find(render(t, framework.Release{Set: set}), "NetworkPolicy", "lockguard"))
		if len(np.Spec.Ingress) != 1 || np.Spec.Ingress[0].Ports[0].Port.IntValue() != 9443 {
			t.Errorf("--set %v: ingress %+v; want the webhook port only", set, np.Spec.Ingress)
		}
	}
}

// TestChartMetadata checks that Chart.yaml's Artifact Hub annotations say
// what the chart does: the image it deploys by default, the CRD it ships
// (the example is checked by the API server in TestInstall), and
// well-formed change entries, and the license (Apache-2.0, as LICENSE).
func TestChartMetadata(t *testing.T) {
	requireHelm(t)
	meta := chartMetadata(t)
	annotation := func(key string, into any) {
		t.Helper()
		v, ok := meta.Annotations[key]
		if !ok {
			t.Fatalf("Chart.yaml has no annotation %s", key)
		}
		if err := yaml.UnmarshalStrict([]byte(v), into); err != nil {
			t.Fatalf("annotation %s: %v", key, err)
		}
	}

	var images []struct{ Name, Image string }
	annotation("artifacthub.io/images", &images)
	d := convert[appsv1.Deployment](t, framework.Find(render(t, framework.Release{}), "Deployment", "lockguard"))
	if len(images) != 1 || images[0].Image != d.Spec.Template.Spec.Containers[0].Image {
		t.Errorf("artifacthub.io/images = %+v; want the one image the chart deploys by default, %s", images, d.Spec.Template.Spec.Containers[0].Image)
	}

	var crds []struct{ Kind, Version, Name, DisplayName, Description string }
	annotation("artifacthub.io/crds", &crds)
	var shipped []string
	for _, o := range readObjects(t, "deploy/chart/lockguard/crds/core.navique.com_locks.yaml") {
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		for _, v := range versions {
			shipped = append(shipped, kind+"/"+v.(map[string]any)["name"].(string)+"/"+o.GetName())
		}
	}
	var annotated []string
	for _, c := range crds {
		annotated = append(annotated, c.Kind+"/"+c.Version+"/"+c.Name)
	}
	if diff := cmp.Diff(shipped, annotated); diff != "" {
		t.Errorf("artifacthub.io/crds: -crds/, +annotation:\n%s", diff)
	}

	var examples []map[string]any
	annotation("artifacthub.io/crdsExamples", &examples)
	if len(examples) != 1 || examples[0]["kind"] != "Lock" {
		t.Errorf("artifacthub.io/crdsExamples = %v; want one Lock", examples)
	}

	var changes []struct{ Kind, Description string }
	annotation("artifacthub.io/changes", &changes)
	for _, c := range changes {
		if !slices.Contains([]string{"added", "changed", "deprecated", "removed", "fixed", "security"}, c.Kind) || c.Description == "" {
			t.Errorf("artifacthub.io/changes entry %+v: want a kind Artifact Hub knows and a description", c)
		}
	}
	if license, err := os.ReadFile(repoFile(t, "LICENSE")); err != nil || !strings.Contains(string(license), "Apache License") || meta.Annotations["artifacthub.io/license"] != "Apache-2.0" {
		t.Errorf("artifacthub.io/license is %q; want Apache-2.0, the repository's LICENSE (%v)", meta.Annotations["artifacthub.io/license"], err)
	}
}

// chartYAML is what the tests read of the chart's Chart.yaml.
type chartYAML struct {
	Version     string
	AppVersion  string `json:"appVersion"`
	Annotations map[string]string
}

// chartMetadata reads the chart's Chart.yaml.
func chartMetadata(t *testing.T) chartYAML {
	t.Helper()
	var meta chartYAML
	data, err := os.ReadFile(repoFile(t, "deploy/chart/lockguard/Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatal(err)
	}
	return meta
}

// TestHelmTestPod checks the helm test hook: a Pod of the lockguard image
// that runs lockguard check-webhook against the webhook Service, verifying
// its certificate with the serving certificate's CA (and only the CA: not
// the key), selected by none of the selectors of lockguard's pods, so that
// the Service never sends the API server's calls to it. (TestInstall
// creates it in a namespace that enforces the restricted Pod Security
// Standard; TestCheckWebhook runs the subcommand against lockguard.)
func TestHelmTestPod(t *testing.T) {
	requireHelm(t)
	objs := render(t, framework.Release{Name: "guard", Namespace: "ops", Set: []string{"webhook.servicePort=8443", "image.tag=v9"}})
	pod := convert[corev1.Pod](t, framework.Find(objs, "Pod", "guard-lockguard-test-webhook"))
	if pod.Annotations["helm.sh/hook"] != "test" {
		t.Errorf("annotations %v; want helm.sh/hook: test", pod.Annotations)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("restartPolicy %s, automountServiceAccountToken %v; want Never and false (it needs no API access)", pod.Spec.RestartPolicy, pod.Spec.AutomountServiceAccountToken)
	}
	d := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "guard-lockguard"))
	c := pod.Spec.Containers[0]
	if c.Image != d.Spec.Template.Spec.Containers[0].Image || len(c.Command) != 0 {
		t.Errorf("image %s, command %v; want lockguard's image %s and its entrypoint", c.Image, c.Command, d.Spec.Template.Spec.Containers[0].Image)
	}
	wantArgs := []string{
		"check-webhook",
		"--url=https://guard-lockguard-webhook.ops.svc:8443/validate-delete",
		"--namespace=ops",
		"--timeout=5s",
		"--ca-file=/etc/lockguard/ca/ca.crt",
	}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args: -want, +got:\n%s", diff)
	}
	serving := framework.Find(objs, "Certificate", "guard-lockguard-serving")
	secretName, _, _ := unstructured.NestedString(serving.Object, "spec", "secretName")
	wantVolumes := []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secretName, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}}}}
	if diff := cmp.Diff(wantVolumes, pod.Spec.Volumes); diff != "" {
		t.Errorf("volumes: -want, +got:\n%s", diff)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/lockguard/ca" || !c.VolumeMounts[0].ReadOnly {
		t.Errorf("volumeMounts %+v; want the CA read-only at /etc/lockguard/ca", c.VolumeMounts)
	}
	for _, o := range objs {
		var selector map[string]string
		switch o.GetKind() {
		case "Service":
			selector = convert[corev1.Service](t, o).Spec.Selector
		case "Deployment":
			selector = convert[appsv1.Deployment](t, o).Spec.Selector.MatchLabels
		case "PodDisruptionBudget":
			selector, _, _ = unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
		default:
			continue
		}
		if labels.SelectorFromSet(selector).Matches(labels.Set(pod.Labels)) {
			t.Errorf("%s %s selects the helm test Pod (labels %v)", o.GetKind(), o.GetName(), pod.Labels)
		}
	}

	// Without cert-manager: the CA is webhook.tls.caBundle.
	objs = render(t, framework.Release{Name: "guard", Namespace: "ops",
		Set: []string{"certManager.enabled=false", "webhook.tls.existingSecret=my-tls"}, SetString: []string{"webhook.tls.caBundle=Y2E="}})
	pod = convert[corev1.Pod](t, framework.Find(objs, "Pod", "guard-lockguard-test-webhook"))
	if !slices.Contains(pod.Spec.Containers[0].Args, "--ca-bundle=Y2E=") || len(pod.Spec.Volumes) != 0 {
		t.Errorf("args %v, volumes %v; want --ca-bundle=Y2E= and no volume", pod.Spec.Containers[0].Args, pod.Spec.Volumes)
	}
}
