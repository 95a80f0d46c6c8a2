package lockctl

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// ClusterLocks in the plugin (docs/clusterlock.md): kubectl lock, unlock,
// list, show and why take a cluster-scoped kind a ClusterLock protects
// (namespace/prod, crd/NAME, clusterrole/NAME...) through the Lock paths,
// a ClusterLock read as the Lock of its AsLock.

// clusterLocksResource is the ClusterLocks' resource.
var clusterLocksResource = lockv1alpha1.GroupVersion.WithResource("clusterlocks")

// clusterLockGroupResource names ClusterLocks in messages, as kubectl does.
var clusterLockGroupResource = schema.GroupResource{Group: lockv1alpha1.Group, Resource: "clusterlock"}

// clusterScoped is resolveTarget's error for a cluster-scoped kind that a
// ClusterLock protects, not a Lock.
type clusterScoped struct{ t target }

func (e clusterScoped) Error() string {
	return fmt.Sprintf("%s is cluster-scoped: a Lock protects a resource in its own namespace; a ClusterLock protects it (kubectl lock %s)",
		e.t.mapping.Resource.GroupResource(), e.t)
}

// lockKind is where Locks of one kind are read and written: the Locks of
// a namespace, or the ClusterLocks.
type lockKind struct {
	res lockClient
	// gr and kind name them in messages.
	gr   schema.GroupResource
	kind string
	// ns is the Locks' namespace; "" for ClusterLocks.
	ns string
	// encode turns a Lock into the object to create.
	encode func(*lockv1alpha1.Lock) (*unstructured.Unstructured, error)
}

// locks is the lockKind of the Locks of c's namespace.
func (c *clients) locks() lockKind {
	return lockKind{res: c.dynamic.Resource(locksResource).Namespace(c.namespace), gr: lockGroupResource, kind: "Lock", ns: c.namespace, encode: toUnstructured}
}

// clusterLocks is the lockKind of ClusterLocks: a Lock is created as the
// ClusterLock of its name, target, reason, expiry, enforcement and level.
func (c *clients) clusterLocks() lockKind {
	return lockKind{res: c.dynamic.Resource(clusterLocksResource), gr: clusterLockGroupResource, kind: "ClusterLock",
		encode: func(l *lockv1alpha1.Lock) (*unstructured.Unstructured, error) {
			cl := asClusterLock(l)
			cl.TypeMeta = metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "ClusterLock"}
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cl)
			delete(obj, "status")
			return &unstructured.Unstructured{Object: obj}, err
		}}
}

// inNamespace is " in namespace NS", or "" for a cluster-scoped object.
func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}

// runCluster creates a ClusterLock on the cluster-scoped t, named as a
// Lock would be (KIND-NAME, namespace-prod), and waits as for a Lock.
func (o *lockOptions) runCluster(ctx context.Context, s Streams, c *clients, t target) error {
	// As for a Lock, a target that does not exist is most likely a typo;
	// who may not read it may still lock it (the status says if it is missing).
	if _, err := c.dynamic.Resource(t.mapping.Resource).Get(ctx, t.name, metav1.GetOptions{}); err != nil && !apierrors.IsForbidden(err) {
		return err
	}
	name, err := o.lockName(t)
	if err != nil {
		return err
	}
	lock := o.newLock("", name)
	lock.Spec.TargetRef = lockv1alpha1.TargetReference{APIVersion: t.mapping.GroupVersionKind.GroupVersion().String(), Kind: t.kind(), Name: t.name}
	done := func(readOnly bool) string {
		if readOnly {
			return fmt.Sprintf("%s is locked read-only: its deletion, and changes to its spec and metadata (except by exempt principals), are denied until the ClusterLock %s is deleted", t, name)
		}
		return fmt.Sprintf("%s is locked: its deletion is denied until the ClusterLock %s is deleted", t, name)
	}
	return o.create(ctx, s, c.clusterLocks(), lock, done, func(existing *lockv1alpha1.Lock) error {
		if !targets(existing, t) {
			return fmt.Errorf("%s %q already exists and protects %s: choose another name with --name", clusterLockGroupResource, name, scopeString(existing))
		}
		return nil
	})
}

// runCluster deletes the ClusterLocks that target the cluster-scoped t,
// once confirmed, and waits until its delete is allowed.
func (o *unlockOptions) runCluster(ctx context.Context, s Streams, c *clients, t target) error {
	k := c.clusterLocks()
	all, err := listLocks(ctx, k.res)
	if err != nil {
		return err
	}
	protecting := targeting(all, t)
	selectors, err := coveringClusterSelectors(ctx, c, t, all)
	if err != nil {
		return err
	}
	if len(selectors) > 0 {
		return refuseSelectors(s, k, t, selectors, protecting)
	}
	if len(protecting) == 0 {
		fmt.Fprintf(s.ErrOut, "No ClusterLocks protect %s.\n", t)
		return nil
	}
	return o.unlock(ctx, s, k, protecting, c.dynamic.Resource(t.mapping.Resource), t)
}

// coveringClusterSelectors returns the live selector ClusterLocks of all
// (read as Locks) whose selector matches the cluster-scoped t as it is
// now (ClusterLock.Covers); none when t does not exist.
func coveringClusterSelectors(ctx context.Context, c *clients, t target, all []lockv1alpha1.Lock) ([]lockv1alpha1.Lock, error) {
	obj, err := c.dynamic.Resource(t.mapping.Resource).Get(ctx, t.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	gk := t.mapping.GroupVersionKind.GroupKind()
	o := lockv1alpha1.Object{Group: gk.Group, Kind: gk.Kind, Name: t.name, Labels: obj.GetLabels()}
	var out []lockv1alpha1.Lock
	now := clock()
	for i := range all {
		if all[i].HasSelector() && asClusterLock(&all[i]).Covers(now, o) {
			out = append(out, all[i])
		}
	}
	sortLocks(out)
	return out, nil
}

// clusterRBACRefusal matches RBAC's refusal of a verb on ClusterLocks.
var clusterRBACRefusal = regexp.MustCompile(`cannot (\S+) resource "clusterlocks" in API group "` + regexp.QuoteMeta(lockv1alpha1.Group) + `"`)

// clusterRoleHint names the ClusterRole a refusal of an operation on
// ClusterLocks lacks: lockguard-cluster-unlock for the verb unlock
// (lockguard's or the policy's refusal) or RBAC's delete,
// lockguard-cluster-lock for RBAC's create, get, list, watch, patch or
// update (kubectl lock update); "" when msg is no such refusal.
func clusterRoleHint(msg string) string {
	role, verb := "", ""
	if strings.Contains(msg, lockv1alpha1.ClusterUnlockRefusal) {
		role, verb = lockv1alpha1.ClusterUnlockRole, lockv1alpha1.UnlockVerb
	} else if m := clusterRBACRefusal.FindStringSubmatch(msg); m != nil {
		role, verb = lockv1alpha1.ClusterLockRole, m[1]
		if verb == "delete" || verb == "deletecollection" {
			role = lockv1alpha1.ClusterUnlockRole
		}
	}
	if role == "" {
		return ""
	}
	return fmt.Sprintf("You lack the verb %q on ClusterLocks: ask for a ClusterRoleBinding to the ClusterRole %s", verb, role)
}

// isClusterLockType reports whether typ names ClusterLocks, as kubectl
// spells them: clusterlock, clusterlocks, ClusterLock, or qualified with
// the group.
func isClusterLockType(typ string) bool {
	typ = strings.TrimSuffix(strings.ToLower(typ), "."+lockv1alpha1.Group)
	return typ == "clusterlock" || typ == "clusterlocks"
}

// asClusterLock is the ClusterLock that l was read from (lockKind
// clusterLocks reads ClusterLocks as Locks), to print it as it is.
func asClusterLock(l *lockv1alpha1.Lock) *lockv1alpha1.ClusterLock {
	ref := l.Spec.TargetRef
	cl := &lockv1alpha1.ClusterLock{TypeMeta: l.TypeMeta, ObjectMeta: l.ObjectMeta, Status: l.Status,
		Spec: lockv1alpha1.ClusterLockSpec{TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name},
			Reason: l.Spec.Reason, ExpiresAt: l.Spec.ExpiresAt, Enforcement: l.Spec.Enforcement, Level: l.Spec.Level}}
	if s := l.Spec.Selector; s != nil {
		cl.Spec.Selector = &lockv1alpha1.ClusterLockSelector{Kinds: s.Kinds, MatchLabels: s.MatchLabels, MatchExpressions: s.MatchExpressions}
	}
	return cl
}

// listClusterLocks lists the ClusterLocks, sorted, for kubectl lock list
// -A; when the user may not list them, it says so and lists none.
func listClusterLocks(ctx context.Context, s Streams, c *clients) ([]lockv1alpha1.Lock, error) {
	ls, err := listLocks(ctx, c.clusterLocks().res)
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		fmt.Fprintf(s.ErrOut, "Warning: ClusterLocks not listed: %v\n", err)
		return nil, nil
	}
	sortLocks(ls)
	return ls, err
}

// printClusterLockTable prints ClusterLocks as kubectl lock list prints
// Locks, after the line "ClusterLocks:" (and a blank line when a Lock
// table precedes it).
func printClusterLockTable(w io.Writer, ls []lockv1alpha1.Lock, after bool) {
	if after {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "ClusterLocks:")
	_ = printLockTable(w, ls, false, clock())
}
