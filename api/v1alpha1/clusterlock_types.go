package v1alpha1

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ClusterLockedLabel is kept by lockguard's reconciler on each cluster-scoped
// object a live ClusterLock names (value "true"), and removed when none
// does. The chart's webhook entries for cluster-scoped DELETEs select on it
// (objectSelector), so that a lockguard outage refuses only the deletes of
// cluster-locked objects, never every delete of a kind (docs/clusterlock.md).
const ClusterLockedLabel = Group + "/cluster-locked"

// The ClusterRoles the chart ships for ClusterLocks; neither is aggregated
// into the built-in roles (docs/contract.md rule 22).
const (
	// ClusterLockRole creates, reads, lists, watches, updates and patches
	// ClusterLocks: it raises them, but lowering one (Lowers) needs
	// UnlockVerb, which it does not hold.
	ClusterLockRole = "lockguard-cluster-lock"
	// ClusterUnlockRole deletes ClusterLocks and holds UnlockVerb on them
	// (with ClusterLockRole's update, it lowers them).
	ClusterUnlockRole = "lockguard-cluster-unlock"
)

// ClusterTargetReference names the cluster-scoped object a ClusterLock
// protects.
type ClusterTargetReference struct {
	// APIVersion of the target: v1 (Namespace, PersistentVolume),
	// apiextensions.k8s.io/v1 (CustomResourceDefinition),
	// rbac.authorization.k8s.io/v1 (ClusterRole), storage.k8s.io/v1
	// (StorageClass), or a version of core.navique.com (its cluster-scoped
	// kinds). The version is ignored when matching deletes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	APIVersion string `json:"apiVersion"`

	// Kind of the target, exactly as the API serves it: Namespace,
	// CustomResourceDefinition, ClusterRole, StorageClass,
	// PersistentVolume, or a cluster-scoped core.navique.com kind.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Kind string `json:"kind"`

	// Name of the target.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// ClusterLockSpec is the desired state of a ClusterLock: what it
// protects, exactly one of TargetRef (one cluster-scoped object, by name)
// or Selector (the cluster-scoped objects of some kinds whose labels
// match), which cannot change, and the same reason, expiry and
// enforcement as a Lock's.
//
// +kubebuilder:validation:XValidation:rule="has(self.targetRef) != has(self.selector)",message="set exactly one of targetRef (one object, by name) or selector (objects of some kinds, by label)"
// +kubebuilder:validation:XValidation:rule="has(self.targetRef) == has(oldSelf.targetRef) && has(self.selector) == has(oldSelf.selector) && (!has(self.selector) || self.selector == oldSelf.selector)",message="the scope (targetRef or selector) is immutable: delete this ClusterLock and create a new one to protect something else"
type ClusterLockSpec struct {
	// TargetRef is the cluster-scoped object this ClusterLock protects. It
	// cannot be changed: delete the ClusterLock and create a new one to
	// protect something else. Set it or Selector, not both.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="targetRef is immutable: delete this ClusterLock and create a new one to protect another object"
	// +optional
	TargetRef ClusterTargetReference `json:"targetRef,omitzero"`

	// Selector protects the cluster-scoped objects of its kinds whose
	// labels match it, including objects labelled into it later (within
	// about 10 s: docs/clusterlock.md); one relabelled out of it is no
	// longer protected. It cannot be changed. Set it or TargetRef, not
	// both.
	// +optional
	Selector *ClusterLockSelector `json:"selector,omitempty"`

	// Reason is a free-text note, shown in the status and in the denial
	// message. Empty by default.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Reason string `json:"reason,omitempty"`

	// ExpiresAt is when the ClusterLock stops protecting (RFC 3339), as a
	// Lock's (docs/contract.md rule 19). Unset: it never expires.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// Enforcement is Enforce (the default) or Audit: the ClusterLock
	// refuses nothing, and each request it would refuse is allowed with an
	// admission warning, counted (lockguard_would_deny_total) and recorded
	// in status.lastWouldDeny.
	// +kubebuilder:default=Enforce
	// +optional
	Enforcement Enforcement `json:"enforcement,omitempty"`

	// Level is what the ClusterLock refuses, as a Lock's
	// (docs/contract.md rules 16 and 22): CanNotDelete (the default)
	// refuses deleting its target; ReadOnly also refuses changing its spec
	// and metadata, except by the principals lockguard exempts, the status
	// subresource, and lockguard's own labels. Lowering it to CanNotDelete
	// needs the verb unlock on the ClusterLock.
	// +kubebuilder:default=CanNotDelete
	// +optional
	Level LockLevel `json:"level,omitempty"`
}

// ClusterLock protects cluster-scoped objects (Namespaces,
// CustomResourceDefinitions, ClusterRoles, StorageClasses,
// PersistentVolumes or cluster-scoped core.navique.com objects) against
// deletion, one by name (spec.targetRef) or those of some kinds whose
// labels match (spec.selector): while it is live, every DELETE of what it
// covers is refused at admission; with level ReadOnly, so is every change
// of its spec and metadata, except by exempt principals. A ClusterLock on
// a Namespace refuses the namespace's delete whether or not it holds
// Locks. Deleting a ClusterLock
// needs the RBAC verb unlock on it besides delete (the ClusterRole
// lockguard-cluster-unlock). Its status is a Lock's. The rules are
// docs/contract.md (rule 22) in lockguard's repository.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=navique,shortName=clk
// +kubebuilder:printcolumn:name="Target Kind",type=string,JSONPath=`.spec.targetRef.kind`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Scope",type=string,JSONPath=`.status.scope`,priority=1
// +kubebuilder:printcolumn:name="Active",type=boolean,JSONPath=`.status.active`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Level",type=string,JSONPath=`.spec.level`
// +kubebuilder:printcolumn:name="Enforcement",type=string,JSONPath=`.spec.enforcement`,priority=1
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Last Denied",type=date,JSONPath=`.status.lastDenied.time`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`,priority=1
type ClusterLock struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says what the ClusterLock protects.
	// +required
	Spec ClusterLockSpec `json:"spec"`

	// Status is written by lockguard: a Lock's status (Ready and its
	// reasons, active, and the last request refused, lastDenied, or
	// that it would refuse in Audit, lastWouldDeny).
	// +optional
	Status LockStatus `json:"status,omitempty"`
}

// ClusterLockList is a list of ClusterLocks.
//
// +kubebuilder:object:root=true
type ClusterLockList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterLock `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterLock{}, &ClusterLockList{})
}

// ClusterLockableKinds are the cluster-scoped kinds outside
// core.navique.com that a ClusterLock can protect; the group's own
// cluster-scoped kinds can be protected too, except ClusterLock
// (ClusterProtectable).
var ClusterLockableKinds = []schema.GroupKind{
	{Kind: "Namespace"},
	{Kind: "PersistentVolume"},
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"},
	{Group: "storage.k8s.io", Kind: "StorageClass"},
}

// ErrClusterLockTarget is the error of a ClusterLock that targets a
// ClusterLock: deleting a ClusterLock is guarded by the verb unlock, never
// by another ClusterLock.
var ErrClusterLockTarget = fmt.Errorf("a ClusterLock cannot protect another ClusterLock")

// ClusterProtectable returns nil when a ClusterLock may name objects of gk:
// one of ClusterLockableKinds, or a kind of core.navique.com other than
// ClusterLock (whether that kind is served, and cluster-scoped, is the
// API server's to say: the reconciler checks it). Otherwise an error that
// says which kinds can be.
func ClusterProtectable(gk schema.GroupKind) error {
	if gk.Group == Group {
		if gk.Kind == "ClusterLock" {
			return ErrClusterLockTarget
		}
		return nil
	}
	for _, k := range ClusterLockableKinds {
		if k == gk {
			return nil
		}
	}
	names := make([]string, 0, len(ClusterLockableKinds))
	for _, k := range ClusterLockableKinds {
		names = append(names, k.String())
	}
	return fmt.Errorf("a ClusterLock cannot protect a %s: it protects %s, or a cluster-scoped kind of %s", gk, strings.Join(names, ", "), Group)
}

// Target returns the key of the object the ClusterLock protects (its
// Namespace empty), or an error that says why it never can: its
// apiVersion does not parse, or ClusterProtectable refuses its kind;
// ErrClusterSelector for a selector ClusterLock.
func (c *ClusterLock) Target() (TargetKey, error) {
	if c.HasSelector() {
		return TargetKey{}, ErrClusterSelector
	}
	ref := c.Spec.TargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return TargetKey{}, fmt.Errorf("targetRef.apiVersion %q is not a valid API version: %w", ref.APIVersion, err)
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	if err := ClusterProtectable(gk); err != nil {
		return TargetKey{}, err
	}
	return TargetKey{Group: gk.Group, Kind: gk.Kind, Name: ref.Name}, nil
}

// AsLock returns the ClusterLock as a Lock with no namespace, for the code
// that Locks and ClusterLocks share (expiry, enforcement, level, status
// messages, rule 18's Lowers): its metadata, reason, expiry, enforcement,
// level and status, and its target as targetRef or its selector as
// selector.
func (c *ClusterLock) AsLock() *Lock {
	return &Lock{
		ObjectMeta: c.ObjectMeta,
		Spec: LockSpec{
			TargetRef:   TargetReference{APIVersion: c.Spec.TargetRef.APIVersion, Kind: c.Spec.TargetRef.Kind, Name: c.Spec.TargetRef.Name},
			Selector:    c.Spec.Selector.lockSelector(),
			Reason:      c.Spec.Reason,
			ExpiresAt:   c.Spec.ExpiresAt,
			Enforcement: c.Spec.Enforcement,
			Level:       c.Spec.Level,
		},
		Status: c.Status,
	}
}

// Live reports whether the ClusterLock counts at time t: it is not being
// deleted, its scope is valid (Scope) and it has not expired at t (the
// rule of Lock.ExpiredAt).
func (c *ClusterLock) Live(t time.Time) bool {
	if c.DeletionTimestamp != nil {
		return false
	}
	if err := c.Scope(); err != nil {
		return false
	}
	return !c.AsLock().ExpiredAt(t)
}

// Enforces reports whether the ClusterLock refuses what it covers: its
// enforcement is not Audit.
func (c *ClusterLock) Enforces() bool { return c.Spec.Enforcement != EnforcementAudit }

// Covers reports whether the ClusterLock, live at t, protects the
// cluster-scoped object o: o is its target (group, kind and name), or its
// selector matches o's kind and labels (Selects).
func (c *ClusterLock) Covers(t time.Time, o Object) bool {
	return c.Selects(o) && c.Live(t)
}

// ClusterUnlockRefusal is the part of ClusterUnlockMessage that names the
// verb.
const ClusterUnlockRefusal = `needs the verb "` + UnlockVerb + `" on clusterlocks.` + Group + ` (RBAC)`

// ClusterUnlockMessage is the refusal of deleting ClusterLock name (action
// "deleting"), or of an update that lowers what it protects ("lowering the
// expiresAt of"), by a principal without UnlockVerb on it: word for word
// the same from the chart's policy and from lockguard's webhook.
func ClusterUnlockMessage(action, name string) string {
	return fmt.Sprintf("%s ClusterLock %s %s; ask for the ClusterRole %s", action, name, ClusterUnlockRefusal, ClusterUnlockRole)
}

// ReasonLabelForbidden is the Ready reason of a ClusterLock whose target
// lockguard may not label (ClusterLockedLabel): RBAC lets only a principal
// that holds every permission a ClusterRole grants update it (labels
// included), and lockguard holds no escalate. The ClusterLock protects
// once someone who may runs LabelCommand.
const ReasonLabelForbidden = "LabelForbidden"

// LabelCommand is the kubectl command that puts ClusterLockedLabel on the
// object of gk named name.
func LabelCommand(gk schema.GroupKind, name string) string {
	resource := strings.ToLower(gk.Kind)
	if gk.Group != "" && gk.Group != "rbac.authorization.k8s.io" && gk.Group != "apiextensions.k8s.io" && gk.Group != "storage.k8s.io" {
		resource += "." + gk.Group
	}
	return fmt.Sprintf("kubectl label %s %s %s=true", resource, name, ClusterLockedLabel)
}

// LabelForbiddenMessage says that lockguard may not label the object of
// gk named name (for a ClusterRole: it does not hold every permission the
// role grants), and what to run instead.
func LabelForbiddenMessage(gk schema.GroupKind, name string) string {
	why := ": RBAC does not let it patch it"
	if gk.Group == "rbac.authorization.k8s.io" && gk.Kind == "ClusterRole" {
		why = " without holding every permission it grants"
	}
	return fmt.Sprintf("lockguard cannot label %s %s%s; run `%s` as someone who may", gk.Kind, name, why, LabelCommand(gk, name))
}

// ClusterLockPendingAnnotation is put with ClusterLockedLabel on a
// ClusterLock's target by lockguard's admission of the ClusterLock's create
// (value: the time, RFC 3339), before the create is allowed. The
// reconciler leaves the label of an object so marked for
// ClusterLockPendingGrace even when no ClusterLock names it yet: the
// create it was put for may not have reached the reconciler's cache.
const ClusterLockPendingAnnotation = Group + "/cluster-lock-pending"

// ClusterLockPendingGrace is how long ClusterLockPendingAnnotation keeps a
// label that no ClusterLock names: longer than a webhook call may last
// (30 s at most), so the create it was put for has been stored or refused.
const ClusterLockPendingGrace = time.Minute
