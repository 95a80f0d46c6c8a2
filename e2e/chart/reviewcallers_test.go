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

	"github.com/navique/lockguard/e2e/framework"
)

// reviewCallerFlags returns lockguard's --review-client-* flags in the
// Deployment and the check-webhook flag of the helm test Pod.
func reviewCallerFlags(t *testing.T, r framework.Release) (d *appsv1.Deployment, flags, testFlags []string) {
	t.Helper()
	objs := render(t, r)
	name := "lockguard"
	if r.Name != "" {
		name = r.Name + "-lockguard"
	}
	d = convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", name))
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--review-client-") {
			flags = append(flags, a)
		}
	}
	pod := convert[corev1.Pod](t, framework.Find(objs, "Pod", name+"-test-webhook"))
	for _, a := range pod.Spec.Containers[0].Args {
		if a == "--want-client-cert-required" {
			testFlags = append(testFlags, a)
		}
	}
	return d, flags, testFlags
}

// reviewCallerVolume returns the Deployment's review-client-ca volume and
// its mount, nil when there is none.
func reviewCallerVolume(d *appsv1.Deployment) (*corev1.Volume, *corev1.VolumeMount) {
	var v *corev1.Volume
	var m *corev1.VolumeMount
	spec := d.Spec.Template.Spec
	if i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "review-client-ca" }); i >= 0 {
		v = &spec.Volumes[i]
	}
	mounts := spec.Containers[0].VolumeMounts
	if i := slices.IndexFunc(mounts, func(m corev1.VolumeMount) bool { return m.Name == "review-client-ca" }); i >= 0 {
		m = &mounts[i]
	}
	return v, m
}

// TestReviewCallersValue checks webhook.reviewCallers: on, the Deployment
// mounts only the CA of its Secret, read-only, and passes
// --review-client-ca (and --review-client-name when a name is given), and
// the helm test Pod checks that a review without a client certificate is
// refused; off, whatever else is set, the chart renders exactly as by
// default.
func TestReviewCallersValue(t *testing.T) {
	requireHelm(t)
	mount := &corev1.VolumeMount{Name: "review-client-ca", MountPath: "/etc/lockguard/review-client-ca", ReadOnly: true}
	caVolume := func(secret, key string) *corev1.Volume {
		return &corev1.Volume{Name: "review-client-ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secret, Items: []corev1.KeyToPath{{Key: key, Path: "ca.crt"}}}}}
	}
	for _, tc := range []struct {
		name      string
		r         framework.Release
		flags     []string
		testFlags []string
		volume    *corev1.Volume
		mount     *corev1.VolumeMount
	}{
		{name: "default", r: framework.Release{}},
		{
			name: "a CA Secret and a name",
			r: framework.Release{Name: "guard", Set: []string{"webhook.reviewCallers.enabled=true",
				"webhook.reviewCallers.caSecret=apiserver-client-ca", "webhook.reviewCallers.caKey=tls-ca.pem",
				"webhook.reviewCallers.name=kube-apiserver"}},
			flags:     []string{"--review-client-ca=/etc/lockguard/review-client-ca/ca.crt", "--review-client-name=kube-apiserver"},
			testFlags: []string{"--want-client-cert-required"},
			volume:    caVolume("apiserver-client-ca", "tls-ca.pem"),
			mount:     mount,
		},
		{
			name:      "a CA Secret without a name",
			r:         framework.Release{Set: []string{"webhook.reviewCallers.enabled=true", "webhook.reviewCallers.caSecret=apiserver-client-ca"}},
			flags:     []string{"--review-client-ca=/etc/lockguard/review-client-ca/ca.crt"},
			testFlags: []string{"--want-client-cert-required"},
			volume:    caVolume("apiserver-client-ca", "ca.crt"),
			mount:     mount,
		},
		{
			name:      "the chart's CA (cert-manager)",
			r:         framework.Release{Set: []string{"webhook.reviewCallers.enabled=true", "webhook.reviewCallers.name=kube-apiserver"}},
			flags:     []string{"--review-client-ca=/etc/lockguard/review-client-ca/ca.crt", "--review-client-name=kube-apiserver"},
			testFlags: []string{"--want-client-cert-required"},
			volume:    caVolume("lockguard-serving-cert", "ca.crt"),
			mount:     mount,
		},
		{
			name: "the serving Secret's CA (no cert-manager)",
			r: framework.Release{Set: []string{"certManager.enabled=false", "webhook.tls.existingSecret=my-tls",
				"webhook.reviewCallers.enabled=true", "webhook.reviewCallers.name=kube-apiserver"}, SetString: []string{"webhook.tls.caBundle=Y2E="}},
			flags:     []string{"--review-client-ca=/etc/lockguard/review-client-ca/ca.crt", "--review-client-name=kube-apiserver"},
			testFlags: []string{"--want-client-cert-required"},
			volume:    caVolume("my-tls", "ca.crt"),
			mount:     mount,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, flags, testFlags := reviewCallerFlags(t, tc.r)
			if diff := cmp.Diff(tc.flags, flags); diff != "" {
				t.Errorf("lockguard's --review-client-* flags: -want, +got:\n%s", diff)
			}
			if diff := cmp.Diff(tc.testFlags, testFlags); diff != "" {
				t.Errorf("the helm test Pod's --want-client-cert-required: -want, +got:\n%s", diff)
			}
			v, m := reviewCallerVolume(d)
			if diff := cmp.Diff(tc.volume, v); diff != "" {
				t.Errorf("the review-client-ca volume: -want, +got:\n%s", diff)
			}
			if diff := cmp.Diff(tc.mount, m); diff != "" {
				t.Errorf("the review-client-ca mount: -want, +got:\n%s", diff)
			}
		})
	}

	// Off, the other values change nothing.
	off := render(t, framework.Release{Set: []string{"webhook.reviewCallers.enabled=false",
		"webhook.reviewCallers.caSecret=apiserver-client-ca", "webhook.reviewCallers.caKey=tls-ca.pem", "webhook.reviewCallers.name=kube-apiserver"}})
	if diff := cmp.Diff(render(t, framework.Release{}), off); diff != "" {
		t.Errorf("webhook.reviewCallers off with its other values set: -default, +got:\n%s", diff)
	}
}

// TestReviewCallersNeedsName checks that the chart refuses
// webhook.reviewCallers on the serving certificate's CA without a name:
// the replicas' serving certificates come from that CA and would pass.
func TestReviewCallersNeedsName(t *testing.T) {
	requireHelm(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, set := range [][]string{
		{"webhook.reviewCallers.enabled=true"},
		{"webhook.reviewCallers.enabled=true", "webhook.reviewCallers.caSecret="},
	} {
		_, err := framework.Render(ctx, framework.Release{KubeVersion: "1.37.2", Set: set})
		if want := "at '/webhook/reviewCallers/name': minLength: got 0, want 1"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--set %v: err = %v; want one containing %q", set, err, want)
		}
	}
}
