package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Condition types and reasons of a Lock.
const (
	// ConditionReady is True while the Lock is active, that is while its
	// target carries the lock annotation and its deletion is rejected.
	ConditionReady = "Ready"

	// ReasonActive means the target exists and is protected.
	ReasonActive = "Active"
	// ReasonMissingReference means the target does not exist (yet). The Lock
	// still protects the name: a target created later is protected at once
	// and the Lock becomes active.
	ReasonMissingReference = "MissingReference"
	// ReasonInvalidTarget means the target can never be protected: it is not
	// in the core.navique.com group, it is itself a Lock, or it is not a
	// namespaced resource.
	ReasonInvalidTarget = "InvalidTarget"
	// ReasonExpired means the Lock's spec.expiresAt has passed: it protects
	// nothing any more (docs/contract.md rule 19), and stays as a record
	// until it is deleted.
	ReasonExpired = "Expired"
	// ReasonAudit means the Lock is in Audit enforcement: it refuses
	// nothing and records what it would refuse (Ready True, active false).
	ReasonAudit = "Audit"
)

// TargetReference names the resource a Lock protects, in the Lock's namespace.
type TargetReference struct {
	// APIVersion of the target. The core.navique.com group can be locked,
	// and the kinds of other groups the installation opts in (v1 for a
	// PersistentVolumeClaim or a Secret: the chart's protect.resources);
	// the version is ignored when matching deletes. Defaults to
	// core.navique.com/v1alpha1.
	// +kubebuilder:default="core.navique.com/v1alpha1"
	// +kubebuilder:validation:MaxLength=253
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`

	// Kind of the target, exactly as the API serves it (the kind column of
	// `kubectl api-resources`): for example Stack, PostgresCluster or
	// Gateway, not stack or stacks. It must start with an upper-case letter
	// and hold only letters and digits; a kind served under another
	// spelling (Stacks, StAck) makes the Lock InvalidTarget, and a kind not
	// served at all MissingReference, until it is installed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Kind string `json:"kind"`

	// Name of the target, in the Lock's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// GroupKind returns the group and kind of the target. The group is parsed
// from APIVersion (DefaultTargetAPIVersion when empty); an APIVersion that
// does not parse yields an error.
func (r TargetReference) GroupKind() (schema.GroupKind, error) {
	apiVersion := r.APIVersion
	if apiVersion == "" {
		apiVersion = DefaultTargetAPIVersion
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupKind{}, err
	}
	return schema.GroupKind{Group: gv.Group, Kind: r.Kind}, nil
}

// LockSpec is the desired state of a Lock. It names its scope, exactly one
// of TargetRef (one object) or Selector (the objects of the namespace whose
// labels match), and the scope cannot change.
//
// +kubebuilder:validation:XValidation:rule="has(self.targetRef) != has(self.selector)",message="set exactly one of targetRef (one resource) or selector (resources by label; selector: {} for the whole namespace)"
// +kubebuilder:validation:XValidation:rule="has(self.targetRef) == has(oldSelf.targetRef) && has(self.selector) == has(oldSelf.selector) && (!has(self.selector) || self.selector == oldSelf.selector)",message="the scope (targetRef or selector) is immutable: delete this Lock and create a new one to protect something else"
type LockSpec struct {
	// TargetRef is the resource this Lock protects. It cannot be changed:
	// delete the Lock and create a new one to protect something else. Set
	// it or Selector, not both.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="targetRef is immutable: delete this Lock and create a new one to protect another resource"
	// +optional
	TargetRef TargetReference `json:"targetRef,omitzero"`

	// Selector protects every core.navique.com resource of the Lock's
	// namespace whose labels match it, including resources created or
	// labelled later; one relabelled out of it is no longer protected. An
	// empty selector ({}) protects every resource of the namespace and the
	// namespace itself. It cannot be changed. Set it or TargetRef, not both.
	// +optional
	Selector *LockSelector `json:"selector,omitempty"`

	// Level is what the Lock refuses: CanNotDelete (the default) refuses
	// deleting what it protects; ReadOnly also refuses changing its spec and
	// metadata, except by the principals lockguard exempts (the operator's
	// ServiceAccount by default), the status subresource, and lockguard's
	// own annotation and label. The level can be changed.
	// +kubebuilder:default=CanNotDelete
	// +optional
	Level LockLevel `json:"level,omitempty"`

	// Reason is a free-text note, shown in the status and in the denial
	// message. Empty by default.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Reason string `json:"reason,omitempty"`

	// ExpiresAt is when the Lock stops protecting (RFC 3339, a whole
	// second): from that second on, it refuses nothing on any path, its
	// status says Expired, and it stays, as a record, until someone
	// deletes it. A create whose expiresAt is not in the future is
	// refused. Unset (the default): the Lock never expires.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// Enforcement is Enforce (the default: the Lock refuses what its level
	// refuses) or Audit: the Lock refuses nothing, on any path, and each
	// request it would refuse is allowed with an admission warning,
	// counted (lockguard_would_deny_total) and recorded in
	// status.lastWouldDeny. Changing Enforce to Audit needs the verb
	// unlock, as any change that lowers a Lock.
	// +kubebuilder:default=Enforce
	// +optional
	Enforcement Enforcement `json:"enforcement,omitempty"`
}

// LockStatus is the observed state of a Lock.
type LockStatus struct {
	// Scope says what the Lock protects, as Lock.ScopeString writes it
	// from the spec: Kind/name (Stack/forge) for a targetRef Lock,
	// selector:LABELS (with ;kinds=A,B when it names kinds) for a selector
	// Lock, <all> for an empty selector (the namespace and everything in
	// it). Written by lockguard with the rest of the status; the Scope
	// column of kubectl get locks.
	// +optional
	Scope string `json:"scope,omitempty"`

	// Active is true once the target carries the lock annotation. (The
	// webhook denies the target's deletion from the moment the Lock exists;
	// Active reports that the reconciler has seen and annotated the target.)
	// Always present in a written status; false by default.
	// +kubebuilder:default=false
	// +optional
	Active bool `json:"active"`

	// ObservedGeneration is the metadata.generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions of the Lock. Ready is True when the Lock is active, and
	// False with reason MissingReference, InvalidTarget, Expired or
	// NamespaceNotGuarded otherwise. A ReadOnly Lock also has ReadOnly:
	// True (InForce), or False (Pending or GuardDisabled).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Protected says how many resources the Lock covers now, and names up
	// to ten of them.
	// +optional
	Protected *ProtectedStatus `json:"protected,omitempty"`

	// LastDenied is the last request this Lock refused, with the count of
	// refusals so far. Absent until the Lock refuses something.
	// +optional
	LastDenied *DeniedRequest `json:"lastDenied,omitempty"`

	// LastWouldDeny is, for a Lock in Audit enforcement, the last request
	// it would have refused (and allowed), with the count so far. Absent
	// until then.
	// +optional
	LastWouldDeny *DeniedRequest `json:"lastWouldDeny,omitempty"`

	// LastException is the last request this Lock would have refused that
	// a LockException let through (docs/contract.md rule 20): the
	// exception, the user, the operation, the object, when, and the count
	// of such requests so far. Absent until then.
	// +optional
	LastException *DeniedRequest `json:"lastException,omitempty"`
}

// Lock protects core.navique.com resources of its namespace against
// accidental deletion, like an Azure resource lock: spec.targetRef names
// one resource, or spec.selector selects resources by label (selector: {}
// is the whole namespace, itself included). While a live Lock covers a
// resource, every DELETE of it is refused at admission, and so is the
// DELETE of an owner whose cascade would delete it, of its namespace and of
// its kind's CRD. With level ReadOnly, updates of its spec and metadata are
// refused too. Delete the Lock to lift the protection (which needs the RBAC
// verb unlock on it besides delete: the ClusterRole lockguard-unlock). The rules are
// docs/contract.md in lockguard's repository.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="has(self.status) || !has(self.spec.targetRef) || self.spec.targetRef.kind.matches('^[A-Z][A-Za-z0-9]*$')",fieldPath=".spec.targetRef.kind",message="kind must be the resource's Kind as the API serves it, e.g. Stack (not stack or stacks)"
// +kubebuilder:resource:categories=navique,shortName=lk
// +kubebuilder:printcolumn:name="Scope",type=string,JSONPath=`.status.scope`
// +kubebuilder:printcolumn:name="Level",type=string,JSONPath=`.spec.level`
// +kubebuilder:printcolumn:name="Read-Only",type=string,JSONPath=`.status.conditions[?(@.type=="ReadOnly")].reason`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Active",type=boolean,JSONPath=`.status.active`,priority=1
// +kubebuilder:printcolumn:name="Enforcement",type=string,JSONPath=`.spec.enforcement`,priority=1
// +kubebuilder:printcolumn:name="Protected",type=integer,JSONPath=`.status.protected.count`,priority=1
// +kubebuilder:printcolumn:name="Last Denied",type=date,JSONPath=`.status.lastDenied.time`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`,priority=1
type Lock struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says what the Lock protects.
	// +required
	Spec LockSpec `json:"spec"`

	// Status is written by lockguard.
	// +optional
	Status LockStatus `json:"status,omitempty"`
}

// LockList is a list of Locks.
//
// +kubebuilder:object:root=true
type LockList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Lock `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Lock{}, &LockList{})
}
