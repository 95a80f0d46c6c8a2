package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/cmd/kubectl-lock/lockctl"
	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/webhook"
)

// DefaultWebhookName is the name of the chart's webhook, as the API server
// quotes it in denial messages.
const DefaultWebhookName = "delete.lockguard.core.navique.com"

// Kube is the one helper vocabulary of the suites that drive lockguard
// through an API server (the contract suite in-process, the e2e suite
// against the binary or a cluster): namespaces, objects of the sample
// kinds, Locks, their status and annotation, denials, kubectl. Every wait
// polls with a deadline.
type Kube struct {
	// Client is an admin client whose scheme knows Locks.
	Client client.Client
	// Kubeconfig is the admin kubeconfig file for kubectl; empty means
	// kubectl's own default ($KUBECONFIG).
	Kubeconfig string
	// WebhookName is the webhook's name in denial messages; default
	// DefaultWebhookName.
	WebhookName string
	// NamespacePrefix starts the name of every namespace NewNamespace
	// creates (with a random suffix, so that a suite can run twice in one
	// API server).
	NamespacePrefix string
	// LockCRDWithoutScope says the served Lock CRD predates status.scope
	// (the upgrade test's previous chart), whose API server drops the
	// field: WaitLockStatus does not compare it while set.
	LockCRDWithoutScope bool
}

// Kube returns the vocabulary for the Env's admin: a client with
// lockguard's scheme (manager.NewScheme) and an admin kubeconfig file in
// Dir for kubectl. Namespaces it creates start with namespacePrefix.
func (e *Env) Kube(namespacePrefix string) (*Kube, error) {
	scheme, err := manager.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(e.Dir, "admin.kubeconfig")
	if err := WriteKubeconfig(e.Config, kubeconfig); err != nil {
		return nil, err
	}
	return NewKube(c, kubeconfig, namespacePrefix), nil
}

// NewKube returns the vocabulary for an admin client.
func NewKube(c client.Client, kubeconfig, namespacePrefix string) *Kube {
	return &Kube{Client: c, Kubeconfig: kubeconfig, WebhookName: DefaultWebhookName, NamespacePrefix: namespacePrefix}
}

// Waiting: every wait polls with a deadline.
const (
	// PollInterval is how often a wait checks again.
	PollInterval = 100 * time.Millisecond
	// DefaultTimeout bounds waits for lockguard's reconcilers and webhook.
	DefaultTimeout = 30 * time.Second
)

// Kinds of the sample CRDs (e2e/testdata/crds): Stack and PostgresCluster
// serve v1alpha1 and v1beta1, Region is cluster-scoped.
var (
	StackGVK           = schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"}
	PostgresClusterGVK = schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "PostgresCluster"}
	RegionGVK          = schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Region"}
)

// NewNamespace creates a namespace for one test and deletes it, its Locks
// first (without waiting), at the end of the test.
func (k *Kube) NewNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k.NamespacePrefix + prefix + "-" + rand.String(5)}}
	if err := k.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", ns.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The Locks first: the namespace guard denies deleting a namespace
		// that holds Locks on existing objects.
		_ = k.Client.DeleteAllOf(ctx, &lockv1alpha1.Lock{}, client.InNamespace(ns.Name))
		_ = client.IgnoreNotFound(k.Client.Delete(ctx, ns))
	})
	return ns.Name
}

// Object returns an object of a sample kind, not yet created.
func Object(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": "small"}}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// CreateObject creates an object of a sample kind.
func (k *Kube) CreateObject(t *testing.T, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := Object(gvk, ns, name)
	if err := k.Client.Create(t.Context(), u); err != nil {
		t.Fatalf("creating %s %s/%s: %v", gvk.Kind, ns, name, err)
	}
	return u
}

// GetObject reads an object of a sample kind.
func (k *Kube) GetObject(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := k.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
	return u, err
}

// DeleteObject deletes an object of a sample kind through gvk's version.
func (k *Kube) DeleteObject(ctx context.Context, gvk schema.GroupVersionKind, ns, name string, opts ...client.DeleteOption) error {
	return k.Client.Delete(ctx, Object(gvk, ns, name), opts...)
}

// CreateLock creates a Lock, retrying while lockguard refuses it as
// retryable (RetryLockCreate).
func (k *Kube) CreateLock(t *testing.T, l *lockv1alpha1.Lock) *lockv1alpha1.Lock {
	t.Helper()
	if err := RetryLockCreate(t.Context(), func(ctx context.Context) error { return k.Client.Create(ctx, l) }); err != nil {
		t.Fatalf("creating Lock %s/%s: %v", l.Namespace, l.Name, err)
	}
	return l
}

// RetryLockCreate calls create until it succeeds, fails otherwise than
// with one of lockguard's retryable refusals, or 30s have passed: kubectl
// lock's retry (lockctl.CreateRetrying). lockguard refuses a Lock create,
// retryably, while a replica could not be told about it (internal/peers):
// for up to the subscription lease (10s) after a replica has gone, and
// until a new one has subscribed; and when it could not label what the
// Lock covers first (docs/optin.md).
func RetryLockCreate(ctx context.Context, create func(context.Context) error) error {
	return lockctl.CreateRetrying(ctx, 30*time.Second, create)
}

// DeleteLock deletes a Lock and waits until it is gone (nothing, lockguard
// least of all, may hold a Lock's deletion up).
func (k *Kube) DeleteLock(t *testing.T, l *lockv1alpha1.Lock) {
	t.Helper()
	if err := k.Client.Delete(t.Context(), l); err != nil {
		t.Fatalf("deleting Lock %s/%s: %v", l.Namespace, l.Name, err)
	}
	Eventually(t, DefaultTimeout, "Lock "+l.Name+" gone", func(ctx context.Context) error {
		err := k.Client.Get(ctx, client.ObjectKeyFromObject(l), &lockv1alpha1.Lock{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("Lock %s/%s still there (err %v)", l.Namespace, l.Name, err)
	})
}

// Eventually calls f until it returns nil, failing the test with f's last
// error after timeout. It returns how long it waited.
func Eventually(t *testing.T, timeout time.Duration, what string, f func(ctx context.Context) error) time.Duration {
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
		case <-time.After(PollInterval):
		}
	}
}

// Consistently calls f until d has passed, failing the test as soon as it
// returns an error.
func Consistently(t *testing.T, d time.Duration, what string, f func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if err := f(t.Context()); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(PollInterval)
	}
}

// AnnotationIs returns a check that the object's lock annotation is want;
// "" means no annotation.
func (k *Kube) AnnotationIs(gvk schema.GroupVersionKind, ns, name, want string) func(context.Context) error {
	return func(ctx context.Context) error {
		u, err := k.GetObject(ctx, gvk, ns, name)
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

// WaitAnnotation waits until the object's lock annotation is want ("" for
// none).
func (k *Kube) WaitAnnotation(t *testing.T, gvk schema.GroupVersionKind, ns, name, want string) {
	t.Helper()
	Eventually(t, DefaultTimeout, "lock annotation", k.AnnotationIs(gvk, ns, name, want))
}

// ScraperTokens creates, in a namespace of its own, two ServiceAccounts
// and returns a token of each: the first may GET /metrics (a ClusterRole
// and binding, deleted at the end of the test), the second may not, as a
// Prometheus and a stranger scraping lockguard's metrics.
func (k *Kube) ScraperTokens(t *testing.T) (allowed, denied string) {
	t.Helper()
	ctx := t.Context()
	ns := k.NewNamespace(t, "scrapers")
	token := func(name string) string {
		t.Helper()
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := k.Client.Create(ctx, sa); err != nil {
			t.Fatal(err)
		}
		tr := &authenticationv1.TokenRequest{}
		if err := k.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
			t.Fatalf("creating a token for ServiceAccount %s/%s: %v", ns, name, err)
		}
		return tr.Status.Token
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader-" + ns},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: ns}}}
	for _, o := range []client.Object{role, binding} {
		if err := k.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Client.Delete(context.Background(), o) })
	}
	return token("scraper"), token("nobody")
}

// RemoveAnnotation removes the lock annotation of an object by hand (a
// JSON patch), as a user editing it would.
func (k *Kube) RemoveAnnotation(t *testing.T, gvk schema.GroupVersionKind, ns, name string) {
	t.Helper()
	patch := `[{"op":"remove","path":"/metadata/annotations/` + strings.ReplaceAll(lockv1alpha1.LockedAnnotation, "/", "~1") + `"}]`
	if err := k.Client.Patch(t.Context(), Object(gvk, ns, name), client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		t.Fatalf("removing the lock annotation of %s %s/%s: %v", gvk.Kind, ns, name, err)
	}
}

// Exists returns a check that the object exists (and is not being deleted).
func (k *Kube) Exists(gvk schema.GroupVersionKind, ns, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		u, err := k.GetObject(ctx, gvk, ns, name)
		if err != nil {
			return fmt.Errorf("%s %s/%s: %w", gvk.Kind, ns, name, err)
		}
		if u.GetDeletionTimestamp() != nil {
			return fmt.Errorf("%s %s/%s is being deleted", gvk.Kind, ns, name)
		}
		return nil
	}
}

// Gone returns a check that the object does not exist.
func (k *Kube) Gone(gvk schema.GroupVersionKind, ns, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := k.GetObject(ctx, gvk, ns, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%s %s/%s still exists", gvk.Kind, ns, name)
	}
}

// MustExist fails the test unless the object exists and is not being
// deleted; it returns it.
func (k *Kube) MustExist(t *testing.T, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := k.GetObject(t.Context(), gvk, ns, name)
	if err != nil {
		t.Fatalf("%s %s/%s: %v", gvk.Kind, ns, name, err)
	}
	if u.GetDeletionTimestamp() != nil {
		t.Fatalf("%s %s/%s is being deleted", gvk.Kind, ns, name)
	}
	return u
}

// LockStatus is what a test expects of a Lock's status.
type LockStatus struct {
	Active  bool
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// ActiveStatus is the status of a Lock whose target exists and is
// annotated, or of a live selector Lock whose namespace is guarded. Its
// message is the product's (controller.ActiveMessage), as DenialMessage's
// is the webhook's: the suites check that each Lock says the message for
// its spec, for its generation; the wording is pinned once, by the unit
// test next to it.
func ActiveStatus(l *lockv1alpha1.Lock) LockStatus {
	return LockStatus{Active: true, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonActive, Message: controller.ActiveMessage(l)}
}

// AuditStatus is the status of a live Lock in Audit enforcement
// (docs/contract.md rule 20): Ready True, reason Audit, not active, with
// the product's message (controller.AuditMessage).
func AuditStatus(l *lockv1alpha1.Lock) LockStatus {
	return LockStatus{Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonAudit, Message: controller.AuditMessage(l)}
}

// MissingStatus is the status of a Lock whose target does not exist, with
// the product's message (controller.MissingMessage).
func MissingStatus(l *lockv1alpha1.Lock) LockStatus {
	return LockStatus{
		Status: metav1.ConditionFalse, Reason: lockv1alpha1.ReasonMissingReference,
		Message: controller.MissingMessage(l.Spec.TargetRef.Kind, l.Spec.TargetRef.Name, l.Namespace),
	}
}

// InvalidStatus is the status of a Lock whose target can never be locked.
func InvalidStatus(message string) LockStatus {
	return LockStatus{Status: metav1.ConditionFalse, Reason: lockv1alpha1.ReasonInvalidTarget, Message: message}
}

// WaitLockStatus waits until the Lock's status is exactly want, computed
// for its current generation, with no condition but Ready (and, for a
// ReadOnly Lock, its ReadOnly condition, which want does not compare),
// and its status.scope is Lock.ScopeString's (unless LockCRDWithoutScope).
func (k *Kube) WaitLockStatus(t *testing.T, l *lockv1alpha1.Lock, want LockStatus) {
	t.Helper()
	Eventually(t, DefaultTimeout, fmt.Sprintf("status of Lock %s", l.Name), func(ctx context.Context) error {
		var got lockv1alpha1.Lock
		if err := k.Client.Get(ctx, client.ObjectKeyFromObject(l), &got); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, lockv1alpha1.ConditionReady)
		if cond == nil {
			return fmt.Errorf("no Ready condition yet (status %+v)", got.Status)
		}
		have := LockStatus{Active: got.Status.Active, Status: cond.Status, Reason: cond.Reason, Message: cond.Message}
		if have != want {
			return fmt.Errorf("status:\n  got  %+v\n  want %+v", have, want)
		}
		if got.Status.ObservedGeneration != got.Generation || cond.ObservedGeneration != got.Generation {
			return fmt.Errorf("status observed generation %d, condition %d, want %d", got.Status.ObservedGeneration, cond.ObservedGeneration, got.Generation)
		}
		if want := got.ScopeString(); got.Status.Scope != want && !k.LockCRDWithoutScope {
			return fmt.Errorf("status.scope %q, want %q", got.Status.Scope, want)
		}
		// Ready, and the ReadOnly condition of a ReadOnly Lock, no other.
		for _, c := range got.Status.Conditions {
			if c.Type != lockv1alpha1.ConditionReady && (c.Type != lockv1alpha1.ConditionReadOnly || got.Spec.Level != lockv1alpha1.LevelReadOnly) {
				return fmt.Errorf("conditions %+v, want only Ready (and ReadOnly for a ReadOnly Lock)", got.Status.Conditions)
			}
		}
		return nil
	})
}

// WaitActive waits until each Lock is active (its target annotated), so
// that every lockguard replica's cache has seen it.
func (k *Kube) WaitActive(t *testing.T, locks ...*lockv1alpha1.Lock) {
	t.Helper()
	for _, l := range locks {
		k.WaitLockStatus(t, l, ActiveStatus(l))
	}
}

// DenialMessage is the contract's message for a delete denied by locks.
func DenialMessage(locks ...*lockv1alpha1.Lock) string {
	ls := make([]lockv1alpha1.Lock, 0, len(locks))
	for _, l := range locks {
		ls = append(ls, *l)
	}
	return webhook.DenialMessage(ls)
}

// DenialError is the API server's error text for a delete denied by locks.
func (k *Kube) DenialError(locks ...*lockv1alpha1.Lock) string {
	return fmt.Sprintf("admission webhook %q denied the request: %s", k.WebhookName, DenialMessage(locks...))
}

// WantDenied fails the test unless err is the API server's Forbidden
// error for a delete denied by exactly these locks.
func (k *Kube) WantDenied(t *testing.T, err error, locks ...*lockv1alpha1.Lock) {
	t.Helper()
	if err == nil {
		t.Fatalf("the delete succeeded; want it denied with %q", k.DenialError(locks...))
	}
	if !apierrors.IsForbidden(err) {
		t.Fatalf("got error %v (reason %s), want Forbidden", err, apierrors.ReasonForError(err))
	}
	if got, want := err.Error(), k.DenialError(locks...); got != want {
		t.Fatalf("denial message:\n  got  %s\n  want %s", got, want)
	}
}

// WaitDenied is WantDenied right after Locks were deleted or edited. A
// replica whose cache has not seen the change yet still denies, naming the
// Locks it has (the safe side of cache lag, which shows with several
// replicas), so the delete is retried until the denial names exactly these
// Locks. A delete that goes through fails the test at once.
func (k *Kube) WaitDenied(t *testing.T, gvk schema.GroupVersionKind, ns, name string, locks ...*lockv1alpha1.Lock) {
	t.Helper()
	want := k.DenialError(locks...)
	Eventually(t, DefaultTimeout, fmt.Sprintf("deleting %s %s/%s is denied with %q", gvk.Kind, ns, name, want), func(ctx context.Context) error {
		err := k.DeleteObject(ctx, gvk, ns, name)
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

// DeleteOnceUnlocked deletes a target whose last Lock was just deleted. A
// replica whose cache has not seen the Lock go yet still denies, so a
// denial is retried until the deadline; any other error fails the test.
func (k *Kube) DeleteOnceUnlocked(t *testing.T, gvk schema.GroupVersionKind, ns, name string) {
	t.Helper()
	Eventually(t, DefaultTimeout, fmt.Sprintf("deleting %s %s/%s once unlocked", gvk.Kind, ns, name), func(ctx context.Context) error {
		err := k.DeleteObject(ctx, gvk, ns, name)
		if err != nil && !apierrors.IsForbidden(err) {
			t.Fatalf("deleting %s %s/%s once unlocked: %v", gvk.Kind, ns, name, err)
		}
		return err
	})
}

// KubectlResult is what a kubectl run printed and its exit code.
type KubectlResult struct {
	Stdout, Stderr string
	Code           int
}

// Kubectl runs kubectl (admin credentials) with stdin and returns what
// it printed and its exit code.
func (k *Kube) Kubectl(t *testing.T, stdin string, args ...string) KubectlResult {
	t.Helper()
	if k.Kubeconfig != "" {
		args = append([]string{"--kubeconfig=" + k.Kubeconfig}, args...)
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
	// kubectl 1.37 (not 1.32) names the namespace of what it deleted; the
	// suites compare the older form, so that they pass with either.
	out := deletedFromNamespace.ReplaceAllString(stdout.String(), `" deleted`)
	return KubectlResult{Stdout: out, Stderr: stderr.String(), Code: code}
}

// deletedFromNamespace matches the end of a deletion line of newer kubectl
// (1.37): `<kind> "<name>" deleted from <namespace> namespace`.
var deletedFromNamespace = regexp.MustCompile(`" deleted from [a-z0-9.-]+ namespace`)

// Impersonate returns a client of cfg's API server acting as user in
// groups (and system:authenticated), which may get, update and patch
// Stacks and their status in ns (a Role and RoleBinding of ns, made with
// k's admin client), once it can read Stack ns/stack. Where lockguard's
// own identity is the admin's (in-process suites), a person's update must
// come from such a client: lockguard exempts itself from ReadOnly Locks.
func (k *Kube) Impersonate(t *testing.T, cfg *rest.Config, ns, stack, user string, groups ...string) client.Client {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "stack-writer-"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"stacks", "stacks/status"}, Verbs: []string{"get", "update", "patch"}}}}
	if err := k.Client.Create(t.Context(), role); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if err := k.Client.Create(t.Context(), binding); err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, _ := WarningClient(t, cfg)
	// RBAC takes effect once the authorizer's cache has the binding.
	Eventually(t, DefaultTimeout, user+" can read Stacks", func(ctx context.Context) error {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: stack}, Object(StackGVK, ns, stack))
	})
	return c
}
