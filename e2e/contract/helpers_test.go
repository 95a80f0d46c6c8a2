package contract_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// waitTimeout bounds every wait for the reconciler: the contract says
// "within seconds".
const waitTimeout = 20 * time.Second

var (
	stackV1alpha1 = schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"}
	stackV1beta1  = schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1beta1", Kind: "Stack"}
	pgV1alpha1    = schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "PostgresCluster"}
)

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-"}}
	if err := suite.client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	return ns.Name
}

// object returns an unstructured object of gvk.
func object(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// createObject creates an object of gvk with an empty spec.
func createObject(t *testing.T, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := object(gvk, ns, name)
	u.Object["spec"] = map[string]any{"size": int64(1)}
	if err := suite.client.Create(context.Background(), u); err != nil {
		t.Fatalf("creating %s %s/%s: %v", gvk.Kind, ns, name, err)
	}
	return u
}

// createLock creates a Lock.
func createLock(t *testing.T, l *lockv1alpha1.Lock) *lockv1alpha1.Lock {
	t.Helper()
	if err := suite.client.Create(context.Background(), l); err != nil {
		t.Fatalf("creating Lock %s/%s: %v", l.Namespace, l.Name, err)
	}
	return l
}

// deleteLock deletes a Lock and waits until it is gone.
func deleteLock(t *testing.T, ns, name string) {
	t.Helper()
	l := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := suite.client.Delete(context.Background(), l); err != nil {
		t.Fatalf("deleting Lock %s/%s: %v", ns, name, err)
	}
	eventually(t, "Lock "+name+" is gone", func() error {
		err := suite.client.Get(context.Background(), client.ObjectKeyFromObject(l), l)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %v)", err)
	})
}

// eventually polls check until it returns nil, failing the test with the
// last error after waitTimeout.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var err error
	for {
		if err = check(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s: %v", what, waitTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// annotation returns the lock annotation of an object and whether it is set.
func annotation(gvk schema.GroupVersionKind, ns, name string) (string, bool, error) {
	u := object(gvk, ns, name)
	if err := suite.client.Get(context.Background(), client.ObjectKeyFromObject(u), u); err != nil {
		return "", false, err
	}
	v, ok := u.GetAnnotations()[lockv1alpha1.LockedAnnotation]
	return v, ok, nil
}

// waitAnnotation waits until the object's lock annotation is want ("" means
// absent).
func waitAnnotation(t *testing.T, gvk schema.GroupVersionKind, ns, name, want string) {
	t.Helper()
	eventually(t, fmt.Sprintf("annotation of %s %s/%s is %q", gvk.Kind, ns, name, want), func() error {
		got, ok, err := annotation(gvk, ns, name)
		if err != nil {
			return err
		}
		if want == "" && ok {
			return fmt.Errorf("annotation is set to %q", got)
		}
		if got != want {
			return fmt.Errorf("annotation is %q", got)
		}
		return nil
	})
}

// lockState is the part of a Lock's status the tests compare.
type lockState struct {
	Active bool
	Ready  metav1.ConditionStatus
	Reason string
}

func getLockState(ns, name string) (lockState, *lockv1alpha1.Lock, error) {
	var l lockv1alpha1.Lock
	if err := suite.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &l); err != nil {
		return lockState{}, nil, err
	}
	st := lockState{Active: l.Status.Active}
	if c := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReady); c != nil {
		st.Ready, st.Reason = c.Status, c.Reason
	}
	return st, &l, nil
}

// waitLockState waits until the Lock's status is want and returns the Lock.
func waitLockState(t *testing.T, ns, name string, want lockState) *lockv1alpha1.Lock {
	t.Helper()
	var l *lockv1alpha1.Lock
	eventually(t, fmt.Sprintf("Lock %s/%s has status %+v", ns, name, want), func() error {
		got, lock, err := getLockState(ns, name)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("status is %+v", got)
		}
		l = lock
		return nil
	})
	return l
}

// waitObserved waits until the Lock's status.observedGeneration reaches
// generation, which means lockguard's cache holds that generation.
func waitObserved(t *testing.T, ns, name string, generation int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("Lock %s/%s observes generation %d", ns, name, generation), func() error {
		var l lockv1alpha1.Lock
		if err := suite.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &l); err != nil {
			return err
		}
		if l.Status.ObservedGeneration < generation {
			return fmt.Errorf("observedGeneration is %d", l.Status.ObservedGeneration)
		}
		return nil
	})
}

var (
	active           = lockState{Active: true, Ready: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonActive}
	missingReference = lockState{Active: false, Ready: metav1.ConditionFalse, Reason: lockv1alpha1.ReasonMissingReference}
	invalidTarget    = lockState{Active: false, Ready: metav1.ConditionFalse, Reason: lockv1alpha1.ReasonInvalidTarget}
)

// deleteErr deletes an object through the API and returns the error.
func deleteErr(gvk schema.GroupVersionKind, ns, name string, opts ...client.DeleteOption) error {
	return suite.client.Delete(context.Background(), object(gvk, ns, name), opts...)
}

// denialPrefix is the prefix the API server puts before a webhook's
// denial message.
const denialPrefix = `admission webhook "delete.lockguard.core.navique.com" denied the request: `

// wantDenied fails unless err is the API server's Forbidden error carrying
// exactly msg from lockguard.
func wantDenied(t *testing.T, err error, msg string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("delete: got error %v, want Forbidden", err)
	}
	if got, want := err.Error(), denialPrefix+msg; got != want {
		t.Fatalf("delete: got message\n  %s\nwant\n  %s", got, want)
	}
}

// kubectl runs kubectl against the test API server.
func kubectl(args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", suite.kubeconfig}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// exitCode returns the exit code of a command's error (0 for nil).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// trim trims surrounding whitespace.
func trim(s string) string { return strings.TrimSpace(s) }
