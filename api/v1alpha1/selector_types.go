package v1alpha1

// Selector operators of a LabelSelectorRequirement, as metav1's.
const (
	// SelectorOpIn matches a label whose value is one of the values.
	SelectorOpIn = "In"
	// SelectorOpNotIn matches an object without the label or with a value
	// that is none of the values.
	SelectorOpNotIn = "NotIn"
	// SelectorOpExists matches an object with the label, whatever its value.
	SelectorOpExists = "Exists"
	// SelectorOpDoesNotExist matches an object without the label.
	SelectorOpDoesNotExist = "DoesNotExist"
)

// LockSelector chooses the resources a selector Lock protects, in its
// namespace: those whose labels match MatchLabels and MatchExpressions
// (the same fields and meaning as a Kubernetes label selector) and whose
// kind is one of Kinds (any kind when Kinds is empty). An empty selector
// protects every resource of the namespace and the namespace itself.
//
// The fields are metav1.LabelSelector's, declared here so that the API
// server bounds them and rejects an unknown operator before lockguard sees
// the Lock; LabelSelector converts.
type LockSelector struct {
	// MatchLabels selects resources that carry every one of these labels
	// with exactly these values.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && size(self[k]) <= 63)",message="a label key has at most 317 characters and a label value at most 63"
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`

	// MatchExpressions selects resources whose labels satisfy every one of
	// these requirements.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`

	// Kinds limits the selector to resources of these kinds, each spelled
	// exactly as the API serves it (Stack, not stack or stacks). Empty
	// means every kind of the core.navique.com group. A kind of another
	// group that the installation opts in (PersistentVolumeClaim, Secret:
	// the chart's protect.resources) is covered only when named here.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[A-Z][A-Za-z0-9]*$`
	// +listType=set
	// +optional
	Kinds []string `json:"kinds,omitempty"`
}

// LabelSelectorRequirement is one requirement of a LockSelector, as in a
// Kubernetes label selector: a key, an operator and values.
//
// +kubebuilder:validation:XValidation:rule="self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : (!has(self.values) || size(self.values) == 0)",message="values must be non-empty for the operators In and NotIn, and empty for Exists and DoesNotExist"
type LabelSelectorRequirement struct {
	// Key is the label key the requirement applies to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +required
	Key string `json:"key"`

	// Operator is one of In, NotIn, Exists and DoesNotExist.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	// +required
	Operator string `json:"operator"`

	// Values of the key: non-empty for In and NotIn, empty for Exists and
	// DoesNotExist.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}
