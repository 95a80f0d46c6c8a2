package chart_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/navique/lockguard/e2e/framework"
)

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
		// The transport's memory, which the render checks against
		// GOMEMLIMIT (TestSizingTransportFails): 1024 connections and a
		// 64 MiB body budget, the binary's defaults.
		"webhook-max-connections":    "1024",
		"webhook-max-buffered-bytes": "67108864",
		"health-probe-bind-address":  ":8081",
		"metrics-bind-address":       ":8443",
		"metrics-secure":             "true",
		"metrics-cert-dir":           "/tmp/k8s-webhook-server/serving-certs",
		"shutdown-delay":             "10s",
		"cascade-guard":              "Deny",
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
	if len(c.Env) != 2 || c.Env[0].Name != "POD_IP" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("env = %+v; want POD_IP from status.podIP (this replica's address among its peers), then GOMEMLIMIT", c.Env)
	}
	// 90% of the default 256Mi limit (TestGoMemLimit).
	if e := c.Env[len(c.Env)-1]; e.Name != "GOMEMLIMIT" || e.Value != "241591910" {
		t.Errorf("last env = %+v; want GOMEMLIMIT=241591910, 90%% of the 256Mi memory limit", e)
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

// TestGoMemLimit checks that the chart sets the Go runtime's soft memory
// limit to 90% of the container's memory limit, in bytes, from any
// quantity a whole number of bytes writes (the one place it is set:
// docs/limits.md, Memory), and refuses a quantity it cannot read.
func TestGoMemLimit(t *testing.T) {
	requireHelm(t)
	for _, tc := range []struct {
		set, want string
	}{
		{"resources.limits.memory=1Gi", "966367641"},
		{"resources.limits.memory=500M", "450000000"},
		{"resources.limits.memory=268435456", "241591910"},
		{"resources.limits=null", ""},
	} {
		t.Run(tc.set, func(t *testing.T) {
			d := convert[appsv1.Deployment](t, framework.Find(render(t, framework.Release{Set: []string{tc.set}}), "Deployment", "lockguard"))
			got := ""
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "GOMEMLIMIT" {
					got = e.Value
				}
			}
			if got != tc.want {
				t.Errorf("GOMEMLIMIT = %q; want %q", got, tc.want)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := framework.Render(ctx, framework.Release{KubeVersion: "1.37.2", Set: []string{"resources.limits.memory=1.5Gi"}})
	const want = `resources.limits.memory "1.5Gi": the chart sets GOMEMLIMIT from it and reads a whole number with an optional suffix k, M, G, T, Ki, Mi, Gi or Ti`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("render with a 1.5Gi limit: %v; want an error containing %q", err, want)
	}
}
