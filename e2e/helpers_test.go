//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// Waiting: every wait polls with a deadline.
const (
	pollInterval = 100 * time.Millisecond
	// defaultTimeout bounds waits for lockguard's reconcilers and webhook.
	defaultTimeout = 30 * time.Second
)

// Kinds of the sample CRDs (e2e/testdata/crds).
var (
	stackGVK  = schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"}
	pgGVK     = schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "PostgresCluster"}
	regionGVK = schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Region"}
)

// createManifests creates every object of the YAML files (multi-document),
// leaving those that already exist as they are.
func createManifests(ctx context.Context, c client.Client, paths ...string) error {
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("decoding %s: %w", path, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := c.Create(ctx, &u); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating %s %s from %s: %w", u.GetKind(), u.GetName(), path, err)
			}
		}
	}
	return nil
}

// waitCRDsEstablished waits until the named CRDs are Established.
func waitCRDsEstablished(ctx context.Context, c client.Client, names ...string) error {
	for _, name := range names {
		for {
			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
			err := c.Get(ctx, client.ObjectKey{Name: name}, crd)
			if err == nil {
				conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
				established := false
				for _, cond := range conds {
					m, _ := cond.(map[string]any)
					established = established || (m["type"] == "Established" && m["status"] == "True")
				}
				if established {
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s is not established: %v", name, err)
			case <-time.After(pollInterval):
			}
		}
	}
	return nil
}

// newNamespace creates a namespace for one test and deletes it (without
// waiting) at the end of the test.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + prefix + "-" + rand.String(5)}}
	if err := s.c.Create(t.Context(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", ns.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.IgnoreNotFound(s.c.Delete(ctx, ns))
	})
	return ns.Name
}

// newTarget returns an object of a sample kind, not yet created.
func newTarget(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": "small"}}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// createTarget creates an object of a sample kind.
func createTarget(t *testing.T, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := newTarget(gvk, ns, name)
	if err := s.c.Create(t.Context(), u); err != nil {
		t.Fatalf("creating %s %s/%s: %v", gvk.Kind, ns, name, err)
	}
	return u
}

// getTarget reads an object of a sample kind.
func getTarget(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
	return u, err
}

// deleteTarget deletes an object of a sample kind through gvk's version.
func deleteTarget(ctx context.Context, gvk schema.GroupVersionKind, ns, name string, opts ...client.DeleteOption) error {
	return s.c.Delete(ctx, newTarget(gvk, ns, name), opts...)
}

// createLock creates a Lock.
func createLock(t *testing.T, l *lockv1alpha1.Lock) *lockv1alpha1.Lock {
	t.Helper()
	if err := s.c.Create(t.Context(), l); err != nil {
		t.Fatalf("creating Lock %s/%s: %v", l.Namespace, l.Name, err)
	}
	return l
}

// deleteLock deletes a Lock and fails the test if that does not work.
func deleteLock(t *testing.T, l *lockv1alpha1.Lock) {
	t.Helper()
	if err := s.c.Delete(t.Context(), l); err != nil {
		t.Fatalf("deleting Lock %s/%s: %v", l.Namespace, l.Name, err)
	}
}

// eventually calls f until it returns nil, failing the test with f's last
// error after timeout. It returns how long it waited.
func eventually(t *testing.T, timeout time.Duration, what string, f func(ctx context.Context) error) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var last error // the last error of a call the deadline did not cut short
	for {
		err := f(ctx)
		if err == nil {
			d := time.Since(start)
			if d > 2*time.Second {
				t.Logf("%s: took %s", what, d.Round(10*time.Millisecond))
			}
			return d
		}
		if ctx.Err() == nil || last == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s: %v", what, timeout, last)
		case <-time.After(pollInterval):
		}
	}
}

// consistently calls f until d has passed, failing the test as soon as it
// returns an error.
func consistently(t *testing.T, d time.Duration, what string, f func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if err := f(t.Context()); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(pollInterval)
	}
}

// annotationIs returns a check that the object's lock annotation is want;
// "" means no annotation.
func annotationIs(gvk schema.GroupVersionKind, ns, name, want string) func(context.Context) error {
	return func(ctx context.Context) error {
		u, err := getTarget(ctx, gvk, ns, name)
		if err != nil {
			return err
		}
		got, has := u.GetAnnotations()[lockv1alpha1.LockedAnnotation]
		switch {
		case want == "" && has:
			return fmt.Errorf("%s %s/%s has annotation %s=%q, want none", gvk.Kind, ns, name, lockv1alpha1.LockedAnnotation, got)
		case want != "" && got != want:
			return fmt.Errorf("%s %s/%s has annotation %s=%q (present: %t), want %q", gvk.Kind, ns, name, lockv1alpha1.LockedAnnotation, got, has, want)
		}
		return nil
	}
}

// waitAnnotation waits until the object's lock annotation is want ("" for
// none).
func waitAnnotation(t *testing.T, gvk schema.GroupVersionKind, ns, name, want string) {
	t.Helper()
	eventually(t, defaultTimeout, "lock annotation", annotationIs(gvk, ns, name, want))
}

// exists returns a check that the object exists (and is not being deleted).
func exists(gvk schema.GroupVersionKind, ns, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		u, err := getTarget(ctx, gvk, ns, name)
		if err != nil {
			return fmt.Errorf("%s %s/%s: %w", gvk.Kind, ns, name, err)
		}
		if u.GetDeletionTimestamp() != nil {
			return fmt.Errorf("%s %s/%s is being deleted", gvk.Kind, ns, name)
		}
		return nil
	}
}

// gone returns a check that the object does not exist.
func gone(gvk schema.GroupVersionKind, ns, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := getTarget(ctx, gvk, ns, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%s %s/%s still exists", gvk.Kind, ns, name)
	}
}

// mustExist fails the test unless the object exists and is not being
// deleted; it returns it.
func mustExist(t *testing.T, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := getTarget(t.Context(), gvk, ns, name)
	if err != nil {
		t.Fatalf("%s %s/%s: %v", gvk.Kind, ns, name, err)
	}
	if u.GetDeletionTimestamp() != nil {
		t.Fatalf("%s %s/%s is being deleted", gvk.Kind, ns, name)
	}
	return u
}

// lockStatus is what a test expects of a Lock's status.
type lockStatus struct {
	Active  bool
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// activeStatus is the status of a Lock whose target exists and is
// annotated.
func activeStatus(l *lockv1alpha1.Lock) lockStatus {
	msg := fmt.Sprintf("deleting %s %q is denied while this Lock exists", l.Spec.TargetRef.Kind, l.Spec.TargetRef.Name)
	if l.Spec.Reason != "" {
		msg += ": " + l.Spec.Reason
	}
	return lockStatus{Active: true, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonActive, Message: msg}
}

// missingStatus is the status of a Lock whose target does not exist.
func missingStatus(l *lockv1alpha1.Lock) lockStatus {
	return lockStatus{
		Status: metav1.ConditionFalse, Reason: lockv1alpha1.ReasonMissingReference,
		Message: fmt.Sprintf("%s %q not found in namespace %q; its deletion will be denied as soon as it is created", l.Spec.TargetRef.Kind, l.Spec.TargetRef.Name, l.Namespace),
	}
}

// invalidStatus is the status of a Lock whose target can never be locked.
func invalidStatus(message string) lockStatus {
	return lockStatus{Status: metav1.ConditionFalse, Reason: lockv1alpha1.ReasonInvalidTarget, Message: message}
}

// waitLockStatus waits until the Lock's status is exactly want, computed
// for its current generation.
func waitLockStatus(t *testing.T, l *lockv1alpha1.Lock, want lockStatus) {
	t.Helper()
	eventually(t, defaultTimeout, fmt.Sprintf("status of Lock %s", l.Name), func(ctx context.Context) error {
		var got lockv1alpha1.Lock
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(l), &got); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, lockv1alpha1.ConditionReady)
		if cond == nil {
			return fmt.Errorf("no Ready condition yet (status %+v)", got.Status)
		}
		have := lockStatus{Active: got.Status.Active, Status: cond.Status, Reason: cond.Reason, Message: cond.Message}
		if have != want {
			return fmt.Errorf("status:\n  got  %+v\n  want %+v", have, want)
		}
		if got.Status.ObservedGeneration != got.Generation || cond.ObservedGeneration != got.Generation {
			return fmt.Errorf("status observed generation %d, condition %d, want %d", got.Status.ObservedGeneration, cond.ObservedGeneration, got.Generation)
		}
		if len(got.Status.Conditions) != 1 {
			return fmt.Errorf("conditions %+v, want only Ready", got.Status.Conditions)
		}
		return nil
	})
}

// waitActive waits until each Lock is active (its target annotated), so
// that every lockguard replica's cache has seen it.
func waitActive(t *testing.T, locks ...*lockv1alpha1.Lock) {
	t.Helper()
	for _, l := range locks {
		waitLockStatus(t, l, activeStatus(l))
	}
}

// denialMessage is the contract's message for a delete denied by locks.
func denialMessage(locks ...*lockv1alpha1.Lock) string {
	ls := make([]lockv1alpha1.Lock, 0, len(locks))
	for _, l := range locks {
		ls = append(ls, *l)
	}
	return webhook.DenialMessage(ls)
}

// denialError is the API server's error text for a delete denied by locks.
func denialError(locks ...*lockv1alpha1.Lock) string {
	return fmt.Sprintf("admission webhook %q denied the request: %s", s.webhookName, denialMessage(locks...))
}

// wantDenied fails the test unless err is the API server's Forbidden
// error for a delete denied by exactly these locks.
func wantDenied(t *testing.T, err error, locks ...*lockv1alpha1.Lock) {
	t.Helper()
	if err == nil {
		t.Fatalf("the delete succeeded; want it denied with %q", denialError(locks...))
	}
	if !apierrors.IsForbidden(err) {
		t.Fatalf("got error %v (reason %s), want Forbidden", err, apierrors.ReasonForError(err))
	}
	if got, want := err.Error(), denialError(locks...); got != want {
		t.Fatalf("denial message:\n  got  %s\n  want %s", got, want)
	}
}

// waitDenied is wantDenied right after Locks were deleted or edited. A
// replica whose cache has not seen the change yet still denies, naming the
// Locks it has (the safe side of cache lag, which shows with several
// replicas), so the delete is retried until the denial names exactly these
// Locks. A delete that goes through fails the test at once.
func waitDenied(t *testing.T, gvk schema.GroupVersionKind, ns, name string, locks ...*lockv1alpha1.Lock) {
	t.Helper()
	want := denialError(locks...)
	eventually(t, defaultTimeout, fmt.Sprintf("deleting %s %s/%s is denied with %q", gvk.Kind, ns, name, want), func(ctx context.Context) error {
		err := deleteTarget(ctx, gvk, ns, name)
		switch {
		case err == nil:
			t.Fatalf("deleting %s %s/%s succeeded; want it denied with %q", gvk.Kind, ns, name, want)
		case !apierrors.IsForbidden(err):
			t.Fatalf("deleting %s %s/%s: got error %v, want Forbidden", gvk.Kind, ns, name, err)
		case err.Error() != want:
			return err
		}
		return nil
	})
}

// deleteOnceUnlocked deletes a target whose last Lock was just deleted. A
// replica whose cache has not seen the Lock go yet still denies, so a
// denial is retried until the deadline; any other error fails the test.
func deleteOnceUnlocked(t *testing.T, gvk schema.GroupVersionKind, ns, name string) {
	t.Helper()
	eventually(t, defaultTimeout, fmt.Sprintf("deleting %s %s/%s once unlocked", gvk.Kind, ns, name), func(ctx context.Context) error {
		err := deleteTarget(ctx, gvk, ns, name)
		if err != nil && !apierrors.IsForbidden(err) {
			t.Fatalf("deleting %s %s/%s once unlocked: %v", gvk.Kind, ns, name, err)
		}
		return err
	})
}

// kubectlResult is what a kubectl run printed and its exit code.
type kubectlResult struct {
	stdout, stderr string
	code           int
}

// kubectl runs kubectl (admin credentials) with stdin and returns what
// it printed and its exit code.
func kubectl(t *testing.T, stdin string, args ...string) kubectlResult {
	t.Helper()
	if s.kubeconfig != "" {
		args = append([]string{"--kubeconfig=" + s.kubeconfig}, args...)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running kubectl %s: %v", strings.Join(args, " "), err)
	}
	t.Logf("kubectl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	return kubectlResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}
