package chart_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/navique/lockguard/e2e/framework"
)

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
