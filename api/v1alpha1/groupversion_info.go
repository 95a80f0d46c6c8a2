// Package v1alpha1 contains the Lock API of the core.navique.com group.
//
// A Lock protects another core.navique.com resource in its namespace against
// deletion. lockguard's admission webhook denies the DELETE while a live Lock
// targets the resource, and its reconciler keeps the LockedAnnotation on the
// target and the Lock's status.
//
// +kubebuilder:object:generate=true
// +groupName=core.navique.com
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

const (
	// Group is the API group of Locks and of every resource a Lock can protect.
	Group = "core.navique.com"

	// LockedAnnotation is set on a protected resource. Its value is the sorted,
	// comma-separated names of the live Locks that protect it. It is
	// informational (and feeds the optional ValidatingAdmissionPolicy): the
	// webhook decides from the Lock objects, so editing it never unprotects.
	LockedAnnotation = Group + "/locked"

	// DefaultTargetAPIVersion is the apiVersion a TargetReference gets when
	// none is given.
	DefaultTargetAPIVersion = "core.navique.com/v1alpha1"
)

var (
	// GroupVersion is the group and version of the Lock API.
	GroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}

	// SchemeBuilder registers the Lock types with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Lock types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
