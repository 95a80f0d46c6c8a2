package contract_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestPluginOptInKinds (docs/contract.md rule 21, docs/plugin.md): the
// plugin resolves kinds of other groups through discovery as kubectl does
// (pvc, persistentvolumeclaim, secret) and leaves to the server whether
// the installation protects them. `kubectl lock pvc/data` creates a Lock
// with targetRef v1 PersistentVolumeClaim and the PVC's delete is refused;
// `kubectl lock why` says so; `kubectl unlock pvc/data` lifts it. A kind
// not opted in (configmap, deployments.apps) fails with the Lock's
// InvalidTarget message; statefulsets.apps/db, opted in, is locked.
func TestPluginOptInKinds(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "x")
	ctx := t.Context()
	pvcGVK := corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
	for _, name := range []string{"data", "logs"} {
		if err := kube.Client.Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := kube.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}}); err != nil {
		t.Fatal(err)
	}
	if err := kube.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}}); err != nil {
		t.Fatal(err)
	}

	r := kubectlLock(t, "", "pvc/data", "-n", ns, "--reason", "production data")
	if r.err != nil {
		t.Fatalf("kubectl lock pvc/data: %v", r.err)
	}
	if want := "persistentvolumeclaim/data in namespace " + ns + " is locked"; !strings.Contains(r.stdout, want) {
		t.Errorf("kubectl lock pvc/data printed %q, want it to say %q", r.stdout, want)
	}
	lock := getLock(t, ns, "persistentvolumeclaim-data")
	if diff := cmp.Diff(lockv1alpha1.TargetReference{APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: "data"}, lock.Spec.TargetRef); diff != "" {
		t.Errorf("kubectl lock pvc/data: targetRef -want, +got:\n%s", diff)
	}
	wantProtectDenied(t, kube.Client.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}}), lock)
	if r := kubectlLock(t, "", "why", "pvc/data", "-n", ns); r.err != nil || !strings.HasPrefix(r.stdout, "DELETE persistentvolumeclaim/data in namespace "+ns+": denied by lockguard\n") {
		t.Errorf("kubectl lock why pvc/data: %v\n%s", r.err, r.stdout)
	}
	if r := kubectlUnlock(t, "", "pvc/data", "-n", ns, "--yes"); r.err != nil || !strings.Contains(r.stdout, "is unlocked") {
		t.Fatalf("kubectl unlock pvc/data: %v\n%s", r.err, r.stdout)
	}
	if err := dryRunDelete(t, pvcGVK, ns, "data"); err != nil {
		t.Errorf("dry-run delete of PVC data after kubectl unlock: %v", err)
	}

	// The other spellings, and other opted-in kinds (of another group too).
	if err := kube.Client.Create(ctx, newStatefulSet(ns, "db")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ arg, lock, apiVersion, kind, name string }{
		{"persistentvolumeclaim/logs", "l-logs", "v1", "PersistentVolumeClaim", "logs"},
		{"persistentvolumeclaims/logs", "l-logs2", "v1", "PersistentVolumeClaim", "logs"},
		{"secret/creds", "l-creds", "v1", "Secret", "creds"},
		{"statefulsets.apps/db", "l-db", "apps/v1", "StatefulSet", "db"},
	} {
		if r := kubectlLock(t, "", tc.arg, "-n", ns, "--name", tc.lock); r.err != nil {
			t.Errorf("kubectl lock %s: %v", tc.arg, r.err)
			continue
		}
		if diff := cmp.Diff(lockv1alpha1.TargetReference{APIVersion: tc.apiVersion, Kind: tc.kind, Name: tc.name}, getLock(t, ns, tc.lock).Spec.TargetRef); diff != "" {
			t.Errorf("kubectl lock %s: targetRef -want, +got:\n%s", tc.arg, diff)
		}
	}

	// Not opted in: the server's InvalidTarget message.
	labels := map[string]string{"app": "web"}
	if err := kube.Client.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}},
			},
		},
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		arg, lock string
		target    lockv1alpha1.TargetReference
		gk        schema.GroupKind
	}{
		{"configmap/cfg", "configmap-cfg", lockv1alpha1.TargetReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cfg"}, schema.GroupKind{Kind: "ConfigMap"}},
		{"deployments.apps/web", "deployment-web", lockv1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, schema.GroupKind{Group: "apps", Kind: "Deployment"}},
	} {
		r := kubectlLock(t, "", tc.arg, "-n", ns)
		want := "lock.core.navique.com/" + tc.lock + " cannot protect its target: "
		if got := errText(r.err); !strings.HasPrefix(got, want) || !strings.Contains(got, lockv1alpha1.OptInHint(tc.gk)) {
			t.Errorf("kubectl lock %s: error\n  %s\nwant\n  %s...%s", tc.arg, got, want, lockv1alpha1.OptInHint(tc.gk))
		}
		if diff := cmp.Diff(tc.target, getLock(t, ns, tc.lock).Spec.TargetRef); diff != "" {
			t.Errorf("kubectl lock %s: targetRef -want, +got:\n%s", tc.arg, diff)
		}
	}
}
