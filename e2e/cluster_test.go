//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// setupCluster connects to the cluster of $KUBECONFIG, where lockguard is
// deployed, and installs the sample CRDs the scenarios use.
func setupCluster() (*suite, func(), error) {
	cfg, err := framework.ClusterConfig()
	if err != nil {
		return nil, nil, err
	}
	st, err := newSuite("cluster", cfg)
	if err != nil {
		return nil, nil, err
	}
	st.namespace = envOr(envNamespace, lockguardNamespace)
	l := &clusterLockguard{c: st.c, namespace: st.namespace, deployment: envOr(envDeployment, "lockguard")}
	st.lg = l

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var d appsv1.Deployment
	if err := st.c.Get(ctx, client.ObjectKey{Namespace: l.namespace, Name: l.deployment}, &d); err != nil {
		return st, nil, fmt.Errorf("lockguard's Deployment (set %s and %s): %w", envNamespace, envDeployment, err)
	}
	l.replicas = int(ptr.Deref(d.Spec.Replicas, 1))
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := l.Scale(ctx, l.replicas); err != nil {
			fmt.Printf("e2e: restoring %d replicas of lockguard: %v\n", l.replicas, err)
		}
	}

	var vwcs admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := st.c.List(ctx, &vwcs); err != nil {
		return st, cleanup, err
	}
	found := false
	for _, v := range vwcs.Items {
		for _, w := range v.Webhooks {
			found = found || w.Name == st.webhookName
		}
	}
	if !found {
		return st, cleanup, fmt.Errorf("no ValidatingWebhookConfiguration has a webhook named %s (set %s)", st.webhookName, envWebhookName)
	}

	root, err := framework.RepoRoot()
	if err != nil {
		return st, cleanup, err
	}
	if err := framework.InstallSampleCRDs(cfg, root); err != nil {
		return st, cleanup, err
	}
	if err := l.Scale(ctx, max(l.replicas, 1)); err != nil {
		return st, cleanup, err
	}
	return st, cleanup, nil
}

// clusterLockguard is lockguard's Deployment in a cluster.
type clusterLockguard struct {
	c                     client.Client
	namespace, deployment string
	// replicas the Deployment had before the run, restored after it.
	replicas int
}

// Describe says where to look.
func (l *clusterLockguard) Describe() string {
	return fmt.Sprintf("lockguard's logs: kubectl -n %s logs deployment/%s", l.namespace, l.deployment)
}

// pods returns the Deployment's pods.
func (l *clusterLockguard) pods(ctx context.Context) ([]corev1.Pod, error) {
	var d appsv1.Deployment
	if err := l.c.Get(ctx, client.ObjectKey{Namespace: l.namespace, Name: l.deployment}, &d); err != nil {
		return nil, err
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := l.c.List(ctx, &pods, client.InNamespace(l.namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// Scale sets the Deployment's replicas and waits until exactly n pods
// exist and are ready.
func (l *clusterLockguard) Scale(ctx context.Context, n int) error {
	var d appsv1.Deployment
	if err := l.c.Get(ctx, client.ObjectKey{Namespace: l.namespace, Name: l.deployment}, &d); err != nil {
		return err
	}
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
	if err := l.c.Patch(ctx, &d, patch); err != nil {
		return fmt.Errorf("scaling %s/%s to %d: %w", l.namespace, l.deployment, n, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var last string
	for {
		pods, err := l.pods(ctx)
		if err == nil {
			ready := 0
			for _, p := range pods {
				if p.DeletionTimestamp == nil && podReady(&p) {
					ready++
				}
			}
			if len(pods) == n && ready == n {
				if n == 0 {
					return nil
				}
				return l.waitServed(ctx)
			}
			last = fmt.Sprintf("%d pods, %d ready", len(pods), ready)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s/%s did not reach %d ready pods: %s", l.namespace, l.deployment, n, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitServed returns once a server-side dry-run delete of an unlocked Stack
// in lockguard's namespace is answered by lockguard through the API server
// and the webhook's Service. A pod is Ready a moment before kube-proxy routes
// the Service to it: until then the API server's call is refused and the
// delete fails closed, which local mode's proxy never showed.
func (l *clusterLockguard) waitServed(ctx context.Context) error {
	probe := &unstructured.Unstructured{}
	probe.SetGroupVersionKind(framework.StackGVK)
	probe.SetNamespace(l.namespace)
	probe.SetName("e2e-webhook-probe")
	var last error
	for {
		err := l.c.Create(ctx, probe.DeepCopy())
		if err == nil || apierrors.IsAlreadyExists(err) {
			if err = l.c.Delete(ctx, probe.DeepCopy(), client.DryRunAll); err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("lockguard's webhook is not served through its Service: %w", last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Replicas returns the ready pods that are not being deleted.
func (l *clusterLockguard) Replicas(ctx context.Context) ([]replica, error) {
	pods, err := l.pods(ctx)
	if err != nil {
		return nil, err
	}
	var out []replica
	for _, p := range pods {
		if p.DeletionTimestamp == nil && podReady(&p) {
			out = append(out, &podReplica{l: l, pod: p})
		}
	}
	return out, nil
}

// Check scans the logs of the current pods for requests RBAC denied.
func (l *clusterLockguard) Check() []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, err := l.pods(ctx)
	if err != nil {
		return []string{err.Error()}
	}
	user := "system:serviceaccount:" + l.namespace + ":"
	var problems []string
	for _, p := range pods {
		data, err := s.cs.CoreV1().Pods(l.namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			problems = append(problems, fmt.Sprintf("logs of %s: %v", p.Name, err))
			continue
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.Contains(line, user) && strings.Contains(line, " cannot ") {
				problems = append(problems, p.Name+": "+line)
			}
		}
	}
	return problems
}

// podReplica is one lockguard pod.
type podReplica struct {
	l   *clusterLockguard
	pod corev1.Pod
}

// Name returns the pod's name.
func (r *podReplica) Name() string { return r.pod.Name }

// Metrics is not available in cluster mode: the pods serve their metrics
// over HTTPS to authorized scrapers only, and the suite does not
// port-forward.
func (r *podReplica) Metrics(context.Context) (map[string]float64, error) {
	return nil, errors.New("the metrics of a pod are not reachable in cluster mode")
}

// IsLeader reports whether the Lease holder is this pod (controller-runtime
// uses the hostname, the pod's name, followed by "_" and a UUID).
func (r *podReplica) IsLeader(ctx context.Context) (bool, error) {
	var lease coordinationv1.Lease
	if err := r.l.c.Get(ctx, client.ObjectKey{Namespace: r.l.namespace, Name: manager.LeaderElectionID}, &lease); err != nil {
		return false, err
	}
	return strings.HasPrefix(ptr.Deref(lease.Spec.HolderIdentity, ""), r.pod.Name+"_"), nil
}

// Kill deletes the pod with no grace period.
func (r *podReplica) Kill(ctx context.Context) error {
	return r.l.c.Delete(ctx, &r.pod, client.GracePeriodSeconds(0))
}

// Review posts the AdmissionReview to the pod's webhook port through the
// API server's pod proxy (HTTPS to the pod).
func (r *podReplica) Review(ctx context.Context, review *admissionv1.AdmissionReview) (*admissionv1.AdmissionReview, error) {
	port := int32(9443)
	for _, c := range r.pod.Spec.Containers {
		for _, p := range c.Ports {
			if strings.Contains(p.Name, "webhook") {
				port = p.ContainerPort
			}
		}
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	path := fmt.Sprintf("/api/v1/namespaces/%s/pods/https:%s:%d/proxy%s", r.l.namespace, r.pod.Name, port, webhook.Path)
	data, err := s.cs.CoreV1().RESTClient().Post().AbsPath(path).SetHeader("Content-Type", "application/json").Body(body).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w: %s", path, err, data)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("decoding the AdmissionReview from %s: %w", r.pod.Name, err)
	}
	return &out, nil
}
