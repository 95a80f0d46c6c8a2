package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// LockLevel says how much a Lock refuses.
//
// +kubebuilder:validation:Enum=CanNotDelete;ReadOnly
type LockLevel string

const (
	// LevelCanNotDelete refuses deleting what the Lock protects (by its own
	// DELETE, its namespace's, its CRD's or an owner's cascade). Changes are
	// allowed. It is the default.
	LevelCanNotDelete LockLevel = "CanNotDelete"
	// LevelReadOnly refuses deleting what the Lock protects and also
	// changing its spec and metadata (UPDATE and PATCH), except by the
	// principals lockguard is configured to exempt, and except the status
	// subresource and lockguard's own annotation and label (which may be
	// added, not removed: FrozenChange says exactly what is frozen).
	LevelReadOnly LockLevel = "ReadOnly"
)

// ReadOnlyLabel is the label lockguard's reconciler keeps, with the value
// "true", on every resource that a live ReadOnly Lock covers, and removes
// from the others. The update webhook selects on it (objectSelector), so an
// update of a resource under no ReadOnly Lock never calls lockguard. Like
// HasLocksLabel it is only a hint of where to look: the webhook decides
// from the Locks.
const ReadOnlyLabel = Group + "/read-only"

// ConditionReadOnly is the condition of a ReadOnly Lock that says whether
// the freeze is in force: True (reason InForce) once every resource the
// Lock covers carries ReadOnlyLabel, so that the API server sends their
// updates to lockguard; False (reason Pending) before that, or (reason
// GuardDisabled) when the lockguard that reports it serves no update guard.
// A CanNotDelete Lock has no such condition.
const ConditionReadOnly = "ReadOnly"

// Reasons of ConditionReadOnly.
const (
	// ReasonInForce means every resource the Lock covers carries
	// ReadOnlyLabel: their updates are refused.
	ReasonInForce = "InForce"
	// ReasonPending means some resource the Lock covers does not carry
	// ReadOnlyLabel yet: its updates are not refused until it does.
	ReasonPending = "Pending"
	// ReasonGuardDisabled means lockguard runs without its update guard
	// (the chart's guards.readOnly.enabled=false, --read-only-guard=false):
	// updates of what the Lock covers are not refused at all; its deletion
	// is still denied.
	ReasonGuardDisabled = "GuardDisabled"
)

// MaxProtectedNames is how many names status.protected lists at most.
const MaxProtectedNames = 10

// ProtectedStatus says what a Lock covers now.
type ProtectedStatus struct {
	// Count is how many core.navique.com resources the Lock covers now (the
	// namespace of an empty-selector Lock is not counted).
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count"`

	// Resources names up to ten of them, sorted by kind and name.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Resources []ProtectedResource `json:"resources,omitempty"`
}

// ProtectedResource names one resource a Lock covers, in its namespace.
type ProtectedResource struct {
	// Kind of the resource, as the API serves it.
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Name of the resource.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// DeniedRequest is a request a Lock refused: the last one, and how many.
type DeniedRequest struct {
	// Time the request was refused.
	Time metav1.Time `json:"time"`

	// User who sent the request, as the API server authenticated them.
	// +kubebuilder:validation:MaxLength=512
	User string `json:"user"`

	// Operation refused: DELETE or UPDATE.
	// +kubebuilder:validation:MaxLength=16
	Operation string `json:"operation"`

	// Kind of the object the request was for (a locked resource, or the
	// Namespace, CustomResourceDefinition or owner whose deletion would
	// have deleted one).
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// Name of that object.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Count is how many requests this Lock has refused since it was
	// created, as far as lockguard recorded them (at most one status write
	// every few seconds per Lock: refusals in between are added to the
	// count of the next write).
	// +kubebuilder:validation:Minimum=0
	Count int64 `json:"count"`

	// Exception is, in status.lastException only, the LockException that
	// let the request through.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Exception string `json:"exception,omitempty"`
}

// Enforcement says whether a Lock refuses what it covers (Enforce) or
// only reports what it would refuse (Audit).
//
// +kubebuilder:validation:Enum=Enforce;Audit
type Enforcement string

const (
	// EnforcementEnforce refuses what the Lock's level refuses. It is the
	// default.
	EnforcementEnforce Enforcement = "Enforce"
	// EnforcementAudit refuses nothing (docs/contract.md rule 20): each
	// request the Lock would refuse is allowed with an admission warning,
	// counted and recorded in its status.lastWouldDeny.
	EnforcementAudit Enforcement = "Audit"
)
