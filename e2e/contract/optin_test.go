package contract_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// optedIn are the resources of other groups the suite's lockguard
// protects by opt-in (docs/contract.md rule 21): its --protect-resource,
// and the chart's protect.resources its webhook configuration is rendered
// with.
var optedIn = []schema.GroupResource{{Resource: "persistentvolumeclaims"}, {Resource: "secrets"}, {Group: "apps", Resource: "statefulsets"}, {Group: "example.com", Resource: "gizmos"}}

// protectEntry is the name of the chart's webhook entry for the DELETEs of
// opted-in kinds in namespaces holding Locks.
const protectEntry = "protect.lockguard.core.navique.com"

// protectLockedEntry is the name of the chart's webhook entry for the
// DELETEs of the opted-in objects that carry ProtectedLabel: those a Lock
// covers (issue 40).
const protectLockedEntry = "protect-locked.lockguard.core.navique.com"

// protectUpdateEntry is the name of the chart's webhook entry for the
// UPDATEs of the opted-in objects labelled ReadOnlyLabel, in namespaces
// holding Locks (guards.readOnly.enabled).
const protectUpdateEntry = "protect-update.lockguard.core.navique.com"

var (
	pvcGVK    = corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
	secretGVK = corev1.SchemeGroupVersion.WithKind("Secret")
)

func newPVC(ns, name string, labels map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// optInLock returns a targetRef Lock of an object of the core group.
func optInLock(ns, name string, gvk schema.GroupVersionKind, target string) *lockv1alpha1.Lock {
	l := framework.NewLock(ns, name, gvk.Kind, target, "production data")
	l.Spec.TargetRef.APIVersion = gvk.GroupVersion().String()
	return l
}

// wantProtectDenied fails the test unless err is the protect-locked
// entry's denial naming exactly locks (rule 1's message): a locked object
// carries ProtectedLabel, so its delete reaches lockguard through that
// entry, not the protect entry.
func wantProtectDenied(t *testing.T, err error, locks ...*lockv1alpha1.Lock) {
	t.Helper()
	want := fmt.Sprintf("admission webhook %q denied the request: %s", protectLockedEntry, framework.DenialMessage(locks...))
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("delete: got %v, want Forbidden %q", err, want)
	}
}

// deleteLocksFirst deletes the Locks of ns and waits until they are gone,
// so that the namespace's own delete (NewNamespace's cleanup) is not
// refused by a Lock still in lockguard's cache.
func deleteLocksFirst(t *testing.T, locks ...*lockv1alpha1.Lock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultTimeout)
	defer cancel()
	for _, l := range locks {
		if err := client.IgnoreNotFound(kube.Client.Delete(ctx, l)); err != nil {
			t.Errorf("deleting Lock %s/%s: %v", l.Namespace, l.Name, err)
		}
	}
	for _, l := range locks {
		for {
			err := kube.Client.Get(ctx, client.ObjectKeyFromObject(l), &lockv1alpha1.Lock{})
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				t.Errorf("Lock %s/%s not gone: %v", l.Namespace, l.Name, err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestOptInKinds (docs/contract.md rule 21): a PersistentVolumeClaim and
// a Secret, opted in, are protected by a targetRef Lock and by a selector
// Lock that names their kind: their deletes and their namespace's delete
// are refused, the annotation is kept on them, and a selector without
// kinds leaves them out.
func TestOptInKinds(t *testing.T) {
	ns := kube.NewNamespace(t, "optin")
	ctx := t.Context()
	for _, o := range []client.Object{
		newPVC(ns, "data", nil),
		newPVC(ns, "scratch", map[string]string{"tier": "db"}),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, StringData: map[string]string{"password": "x"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-creds", Labels: map[string]string{"tier": "db"}}, StringData: map[string]string{"password": "x"}},
	} {
		if err := kube.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pvcLock := kube.CreateLock(t, optInLock(ns, "keep-data", pvcGVK, "data"))
	secretLock := kube.CreateLock(t, optInLock(ns, "keep-creds", secretGVK, "creds"))
	bySelector := kube.CreateLock(t, framework.NewSelectorLock(ns, "keep-db", lockv1alpha1.LockSelector{
		MatchLabels: map[string]string{"tier": "db"}, Kinds: []string{"PersistentVolumeClaim", "Secret"}}))
	kinds := kube.CreateLock(t, framework.NewSelectorLock(ns, "keep-db-stacks", lockv1alpha1.LockSelector{
		MatchLabels: map[string]string{"tier": "db"}}))
	t.Cleanup(func() { deleteLocksFirst(t, pvcLock, secretLock, bySelector, kinds) })
	kube.WaitActive(t, pvcLock, secretLock, bySelector)

	t.Run("targetRef", func(t *testing.T) {
		wantProtectDenied(t, kube.Client.Delete(ctx, newPVC(ns, "data", nil)), pvcLock)
		wantProtectDenied(t, kube.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}}, client.DryRunAll), secretLock)
		wantProtectDenied(t, kube.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}}), secretLock)
		kube.WaitAnnotation(t, pvcGVK, ns, "data", "keep-data")
		kube.WaitAnnotation(t, secretGVK, ns, "creds", "keep-creds")
		// The label the protect-locked entry selects on, kept.
		var pvc corev1.PersistentVolumeClaim
		if err := kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data"}, &pvc); err != nil {
			t.Fatal(err)
		}
		if got := pvc.Labels[lockv1alpha1.ProtectedLabel]; got != "true" {
			t.Errorf("PVC %s/data label %s = %q, want \"true\"", ns, lockv1alpha1.ProtectedLabel, got)
		}
	})
	t.Run("selector", func(t *testing.T) {
		// keep-db-stacks names no kinds: it covers the group's objects
		// alone, never an opted-in kind. The reconciler writes the
		// annotation and ProtectedLabel in one patch: once the one is
		// there, so is the other.
		kube.WaitAnnotation(t, pvcGVK, ns, "scratch", "keep-db")
		kube.WaitAnnotation(t, secretGVK, ns, "db-creds", "keep-db")
		wantProtectDenied(t, kube.Client.Delete(ctx, newPVC(ns, "scratch", nil)), bySelector)
		wantProtectDenied(t, kube.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-creds"}}), bySelector)
	})
	t.Run("namespace", func(t *testing.T) {
		err := kube.Client.Delete(ctx, namespace(ns))
		if err == nil || !strings.Contains(err.Error(), "namespace is protected by Lock(s) [keep-creds keep-data keep-db]") {
			t.Fatalf("deleting namespace %s: got %v, want it refused naming keep-creds keep-data keep-db", ns, err)
		}
	})
	for _, o := range []struct {
		gvk  schema.GroupVersionKind
		name string
	}{{pvcGVK, "data"}, {pvcGVK, "scratch"}, {secretGVK, "creds"}, {secretGVK, "db-creds"}} {
		kube.MustExist(t, o.gvk, ns, o.name)
	}
}

// TestOptInNotOptedIn: a Lock on a kind of another group that the
// installation does not opt in is InvalidTarget, and says how to opt in.
func TestOptInNotOptedIn(t *testing.T) {
	ns := kube.NewNamespace(t, "optin-not")
	lock := optInLock(ns, "keep-settings", corev1.SchemeGroupVersion.WithKind("ConfigMap"), "settings")
	kube.CreateLock(t, lock)
	kube.WaitLockStatus(t, lock, framework.InvalidStatus(`only core.navique.com resources can be locked, and targetRef.apiVersion "v1" is in group ""; `+
		lockv1alpha1.OptInHint(schema.GroupKind{Kind: "ConfigMap"})))
}

// TestOptInOutageOnlyWhereLocks (docs/contract.md rule 21, issue 40):
// while lockguard cannot answer, the chart's entries for opted-in kinds
// refuse only where Locks are. The test's two namespaces are left out of
// the suite's webhook (ownWebhookLabel) and get copies of the chart's
// protect, protect-locked and protect-update entries pointed at a port
// nobody serves: there lockguard is down, while the suite's reconciler
// still labels the namespace holding a Lock (has-locks) and the PVC a
// ReadOnly Lock covers (protected, read-only). Then the locked PVC's
// delete is refused (protect-locked, fail closed) and so is its update
// (protect-update); an unlocked PVC's delete is refused in the namespace
// holding the Lock (protect: the documented blast radius) and goes
// through in the namespace without Locks; an unlocked PVC's update goes
// through (protect-update selects the read-only objects alone).
func TestOptInOutageOnlyWhereLocks(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	mark := map[string]string{ownWebhookLabel: "optin-outage-" + rand.String(5)}
	free := kube.NewNamespace(t, "optin-free")
	held := kube.NewNamespace(t, "optin-held")
	for _, ns := range []string{free, held} {
		n := namespace(ns)
		n.Labels = mark
		if err := kube.Client.Patch(ctx, n, client.MergeFrom(namespace(ns))); err != nil {
			t.Fatal(err)
		}
		if err := kube.Client.Create(ctx, newPVC(ns, "unlocked", nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := kube.Client.Create(ctx, newPVC(held, "data", nil)); err != nil {
		t.Fatal(err)
	}
	lock := optInLock(held, "freeze-data", pvcGVK, "data")
	lock.Spec.Level = lockv1alpha1.LevelReadOnly
	kube.CreateLock(t, lock)
	t.Cleanup(func() { deleteLocksFirst(t, lock) })
	kube.WaitActive(t, lock)
	framework.Eventually(t, framework.DefaultTimeout, "namespace "+held+" labelled", namespaceLabelIs(held, true))
	framework.Eventually(t, framework.DefaultTimeout, "PVC data labelled protected and read-only", func(ctx context.Context) error {
		var pvc corev1.PersistentVolumeClaim
		if err := kube.Client.Get(ctx, client.ObjectKey{Namespace: held, Name: "data"}, &pvc); err != nil {
			return err
		}
		if pvc.Labels[lockv1alpha1.ProtectedLabel] != "true" || pvc.Labels[lockv1alpha1.ReadOnlyLabel] != "true" {
			return fmt.Errorf("labels %v", pvc.Labels)
		}
		return nil
	})
	if err := namespaceLabelIs(free, false)(ctx); err != nil {
		t.Fatal(err)
	}
	installOutage(t, mark, protectEntry, protectLockedEntry, protectUpdateEntry)

	refused := func(entry string, err error) error {
		if want := fmt.Sprintf("failed calling webhook %q", entry); err == nil || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("got %v; want a failure calling %s", err, entry)
		}
		return nil
	}
	// Once the API server uses the entries: the unlocked PVC of held
	// cannot be deleted (dry runs, so that it stays).
	framework.Eventually(t, framework.DefaultTimeout, "the outage refuses in "+held, func(ctx context.Context) error {
		return refused(protectEntry, kube.Client.Delete(ctx, newPVC(held, "unlocked", nil), client.DryRunAll))
	})
	// The locked PVC: neither deleted nor changed.
	if err := refused(protectLockedEntry, kube.Client.Delete(ctx, newPVC(held, "data", nil))); err != nil {
		t.Errorf("deleting the locked PVC: %v", err)
	}
	relabel := func(ns, name string) error {
		return kube.Client.Patch(ctx, newPVC(ns, name, nil), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"lockguard.test/touched":"yes"}}}`)))
	}
	if err := refused(protectUpdateEntry, relabel(held, "data")); err != nil {
		t.Errorf("updating the read-only PVC: %v", err)
	}
	kube.MustExist(t, pvcGVK, held, "data")
	// An unlocked PVC's update, anywhere, and its delete where no Lock is.
	for _, ns := range []string{held, free} {
		if err := relabel(ns, "unlocked"); err != nil {
			t.Errorf("updating the unlocked PVC of %s while lockguard cannot answer: %v", ns, err)
		}
	}
	if err := kube.Client.Delete(ctx, newPVC(free, "unlocked", nil)); err != nil {
		t.Fatalf("deleting an unlocked PVC of a namespace without Locks while lockguard cannot answer: %v", err)
	}
}

// installOutage creates, for the test, a webhook configuration of copies
// of the chart's entries named (as the suite renders them), each pointed
// at a port nobody serves and selecting, beside its own namespaceSelector,
// the namespaces labelled mark: there lockguard is down.
func installOutage(t *testing.T, mark map[string]string, entries ...string) {
	t.Helper()
	ctx := t.Context()
	vwc, err := suite.webhook.WebhookConfiguration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	down := fmt.Sprintf("https://127.0.0.1:%d%s", port, webhook.Path)
	outage := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "optin-outage-" + strings.ToLower(rand.String(5))},
	}
	for _, name := range entries {
		i := slices.IndexFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == name })
		if i < 0 {
			t.Fatalf("the chart rendered no %s entry", name)
		}
		entry := vwc.Webhooks[i]
		wantOutageSelectors(t, entry)
		if entry.NamespaceSelector == nil {
			entry.NamespaceSelector = &metav1.LabelSelector{}
		}
		if entry.NamespaceSelector.MatchLabels == nil {
			entry.NamespaceSelector.MatchLabels = map[string]string{}
		}
		for k, v := range mark {
			entry.NamespaceSelector.MatchLabels[k] = v
		}
		entry.ClientConfig.Service, entry.ClientConfig.URL = nil, &down
		outage.Webhooks = append(outage.Webhooks, entry)
	}
	if err := kube.Client.Create(ctx, outage); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), outage) })
}

// wantOutageSelectors fails the test unless an opted-in kinds' entry of
// the chart selects as docs/optin.md says, which is what bounds an
// outage: protect and protect-update the namespaces labelled has-locks,
// protect-locked the objects labelled protected, in any namespace; all
// three fail closed.
func wantOutageSelectors(t *testing.T, w admissionregistrationv1.ValidatingWebhook) {
	t.Helper()
	if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("%s failurePolicy %v; want Fail", w.Name, w.FailurePolicy)
	}
	switch w.Name {
	case protectLockedEntry:
		if w.NamespaceSelector != nil && (len(w.NamespaceSelector.MatchLabels) > 0 || len(w.NamespaceSelector.MatchExpressions) > 0) {
			t.Errorf("%s namespaceSelector %v; want none", w.Name, w.NamespaceSelector)
		}
		if w.ObjectSelector == nil || len(w.ObjectSelector.MatchExpressions) != 1 || w.ObjectSelector.MatchExpressions[0].Key != lockv1alpha1.ProtectedLabel ||
			w.ObjectSelector.MatchExpressions[0].Operator != metav1.LabelSelectorOpExists {
			t.Errorf("%s objectSelector %v; want %s Exists", w.Name, w.ObjectSelector, lockv1alpha1.ProtectedLabel)
		}
	default:
		if got := w.NamespaceSelector; got == nil || got.MatchLabels[lockv1alpha1.HasLocksLabel] != "true" {
			t.Errorf("%s namespaceSelector %v; want %s=true", w.Name, got, lockv1alpha1.HasLocksLabel)
		}
	}
}

// TestOptInCascadeAndReadOnly: the cascade guard follows an opted-in
// dependent of a core.navique.com owner (a Stack owning a locked Secret:
// the Stack's delete is refused up front, rule 6), and a ReadOnly Lock on
// an opted-in kind refuses its updates (rule 16): the reconciler labels
// it read-only, and the protect-update entry sends them to lockguard.
func TestOptInCascadeAndReadOnly(t *testing.T) {
	ns := kube.NewNamespace(t, "optin-cascade")
	ctx := t.Context()
	owner := kube.CreateObject(t, framework.StackGVK, ns, "app")
	child := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-creds", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(),
	}}}, StringData: map[string]string{"password": "x"}}
	if err := kube.Client.Create(ctx, child); err != nil {
		t.Fatal(err)
	}
	lock := optInLock(ns, "freeze-creds", secretGVK, "app-creds")
	lock.Spec.Level = lockv1alpha1.LevelReadOnly
	kube.CreateLock(t, lock)
	t.Cleanup(func() { deleteLocksFirst(t, lock) })
	kube.WaitActive(t, lock)

	t.Run("cascade", func(t *testing.T) {
		kube.WaitCascadeDenied(t, framework.StackGVK, ns, "app", kube.CascadeDenialError([]*lockv1alpha1.Lock{lock}, "Secret/app-creds"))
		kube.MustExist(t, framework.StackGVK, ns, "app")
	})
	t.Run("readOnly", func(t *testing.T) {
		framework.Eventually(t, framework.DefaultTimeout, "Secret app-creds labelled read-only", func(ctx context.Context) error {
			var s corev1.Secret
			if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(child), &s); err != nil {
				return err
			}
			if s.Labels[lockv1alpha1.ReadOnlyLabel] != "true" {
				return fmt.Errorf("labels %v", s.Labels)
			}
			return nil
		})
		// A person (the suite's admin is lockguard's own identity, exempt).
		person := secretWriter(t, ns, "jane@example.com")
		framework.Eventually(t, framework.DefaultTimeout, "an update of the frozen Secret refused", func(ctx context.Context) error {
			var s corev1.Secret
			if err := person.Get(ctx, client.ObjectKeyFromObject(child), &s); err != nil {
				return err
			}
			s.StringData = map[string]string{"password": "changed"}
			err := person.Update(ctx, &s)
			if err == nil {
				return fmt.Errorf("the update of a Secret under ReadOnly Lock %s went through", lock.Name)
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), protectUpdateEntry) || !strings.Contains(err.Error(), lock.Name) {
				return fmt.Errorf("update: %v; want it refused by the protect-update entry naming %s", err, lock.Name)
			}
			return nil
		})
	})
}

// secretWriter returns a client impersonating user, who may get and
// update the Secrets of ns.
func secretWriter(t *testing.T, ns, user string) client.Client {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "update"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := kube.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(restConfig(t))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, _ := framework.WarningClient(t, cfg)
	return c
}
