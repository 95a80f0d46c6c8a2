package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExceptionOperation is an operation a LockException lets its user send
// through the Locks it pierces.
//
// +kubebuilder:validation:Enum=DELETE;UPDATE
type ExceptionOperation string

const (
	// ExceptionDelete lets the user delete the target (the object guard).
	ExceptionDelete ExceptionOperation = "DELETE"
	// ExceptionUpdate lets the user update the target under ReadOnly Locks
	// (the update guard).
	ExceptionUpdate ExceptionOperation = "UPDATE"
)

// LockExceptionSpec is a break-glass exception (docs/contract.md rule
// 20): User may send Operations on TargetRef through the Locks named in
// Locks until ExpiresAt. The whole spec is fixed at create.
//
// +kubebuilder:validation:XValidation:rule="self.targetRef.kind.matches('^[A-Z][A-Za-z0-9]*$')",fieldPath=".targetRef.kind",message="kind must be the resource's Kind as the API serves it, e.g. Stack (not stack or stacks)"
// +kubebuilder:validation:XValidation:rule="!has(self.targetRef.apiVersion) || self.targetRef.apiVersion.startsWith('core.navique.com/')",fieldPath=".targetRef.apiVersion",message="an exception can only target a core.navique.com resource"
// +kubebuilder:validation:XValidation:rule="!(self.targetRef.kind in ['Lock', 'LockException'])",fieldPath=".targetRef.kind",message="a Lock or a LockException is never locked: an exception cannot target one"
type LockExceptionSpec struct {
	// TargetRef is the resource the exception lets through, in the
	// exception's namespace: a core.navique.com object, as a Lock's
	// targetRef names it.
	// +required
	TargetRef TargetReference `json:"targetRef"`

	// Locks are the names of the Locks (in the exception's namespace) it
	// pierces. Creating the exception needs the verb break-glass on each
	// (the ClusterRole lockguard-break-glass). A request is let through
	// only when every Lock that refuses it is named here.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	// +required
	Locks []string `json:"locks"`

	// Operations are what the exception lets through: DELETE (the Locks'
	// refusal of deleting the target) and UPDATE (a ReadOnly Lock's
	// refusal of changing it).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	// +required
	Operations []ExceptionOperation `json:"operations"`

	// Reason says why the glass is broken: shown in the admission warning
	// of each use and kept with the exception.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	Reason string `json:"reason"`

	// User is the only username the exception lets through. It must be
	// the username of the exception's creator (lockguard refuses the
	// create otherwise), so it is also a record of who created it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	User string `json:"user"`

	// ExpiresAt is when the exception stops letting anything through (RFC
	// 3339, a whole second; from that second on). At create it must be in
	// the future and at most 24 hours ahead (MaxExceptionLifetime, plus
	// ExceptionClockSkew).
	// +required
	ExpiresAt metav1.Time `json:"expiresAt"`
}

// LockException lets one user send some operations on one object through
// Locks that would refuse them, until it expires (docs/contract.md rule
// 20): break-glass without deleting the Lock. Creating one needs the verb
// break-glass on every Lock it names (the ClusterRole
// lockguard-break-glass); its spec cannot change. Each use is recorded in
// the pierced Locks' status.lastException, an Event on them, and
// lockguard_exception_uses_total. Only lockguard's webhook honours
// exceptions: the namespace, CRD and cascade guards, and the chart's
// ValidatingAdmissionPolicy (mode policy or both), never do.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=navique,shortName=lkx
// +kubebuilder:printcolumn:name="Target Kind",type=string,JSONPath=`.spec.targetRef.kind`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Operations",type=string,JSONPath=`.spec.operations`
// +kubebuilder:printcolumn:name="User",type=string,JSONPath=`.spec.user`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="Locks",type=string,JSONPath=`.spec.locks`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LockException struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says what the exception lets through, for whom and until when.
	// It cannot change after create.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a LockException's spec is immutable: delete it and create another"
	// +required
	Spec LockExceptionSpec `json:"spec"`
}

// LockExceptionList is a list of LockExceptions.
//
// +kubebuilder:object:root=true
type LockExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LockException `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LockException{}, &LockExceptionList{})
}
