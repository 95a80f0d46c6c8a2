package v1alpha1

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// What a Lock create carries that lockguard keeps (its namespace, name
// and UID, and its target), judged as the API server judges a Lock before
// admission: the rule is written here once, and the admission of Lock
// creates (webhook/create.go) and the peer protocol (internal/peers) both
// derive from it (docs/contract.md rule 17: every field a client sends is
// bounded where it enters).

// MaxUIDLength bounds a Lock's UID: the API server sets a UUID, 36
// characters, before admission.
const MaxUIDLength = 36

// MaxKindLength and MaxTargetNameLength are the CRD's bounds of
// spec.targetRef.kind and spec.targetRef.name.
const (
	MaxKindLength       = 63
	MaxTargetNameLength = validation.DNS1123SubdomainMaxLength
)

// kindPattern is what every version of the CRD admits as a kind: letters
// and digits, starting with a letter. The current CRD also requires an
// upper-case first letter (a CEL rule on new Locks), which lockguard does
// not repeat: an API server still serving a CRD from before that rule
// admits "stack", and such a Lock is reported InvalidTarget, not refused
// by lockguard (TestKindRuleUpgrade).
var kindPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)

// ValidateAdmitted returns an error naming each of a Lock's fields that
// the API server would not have admitted in a create (ValidateCreated),
// or nil.
func (l *Lock) ValidateAdmitted() error {
	var key *TargetKey
	if !l.HasSelector() {
		k := TargetKey{Namespace: l.Namespace, Name: l.Spec.TargetRef.Name, Kind: l.Spec.TargetRef.Kind}
		if gk, err := l.Spec.TargetRef.GroupKind(); err == nil {
			k.Group = gk.Group
		}
		key = &k
	}
	return ValidateCreated(l.Namespace, l.Name, l.UID, key)
}

// ValidateCreated returns an error naming each field of a Lock create, as
// admission reviews and the peer protocol carry it, that the API server
// would not have admitted, or nil: the namespace is a DNS label and the
// name a DNS subdomain (apimachinery's ValidateObjectMeta, as for every
// custom resource), the UID is set and at most MaxUIDLength; for a
// targetRef Lock (key not nil; nil for a selector Lock), Protectable
// accepts the target's group and kind, and its name and kind are within
// the CRD's bounds, the kind letters and digits (kindPattern). A review
// that carries such a Lock is not the API server's. Values are quoted up to 64 bytes.
func ValidateCreated(namespace, name string, uid types.UID, key *TargetKey) error {
	var errs []string
	check := func(field, value string, msgs []string) {
		if len(msgs) > 0 {
			errs = append(errs, field+" "+quoteBounded(value)+": "+strings.Join(msgs, "; "))
		}
	}
	check("metadata.namespace", namespace, apivalidation.ValidateNamespaceName(namespace, false))
	check("metadata.name", name, apivalidation.NameIsDNSSubdomain(name, false))
	switch {
	case uid == "":
		check("metadata.uid", "", []string{"must be set (the API server sets it before admission)"})
	case len(uid) > MaxUIDLength:
		check("metadata.uid", string(uid), []string{validation.MaxLenError(MaxUIDLength)})
	}
	if key != nil {
		if err := Protectable(key.GroupKind()); err != nil {
			errs = append(errs, "spec.targetRef: "+err.Error())
		}
		check("spec.targetRef.kind", key.Kind, kindErrors(key.Kind))
		check("spec.targetRef.name", key.Name, boundErrors(key.Name, MaxTargetNameLength))
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, ", "))
}

// kindErrors returns what is wrong with kind as the kind of a Lock create.
func kindErrors(kind string) []string {
	if msgs := boundErrors(kind, MaxKindLength); len(msgs) > 0 {
		return msgs
	}
	if !kindPattern.MatchString(kind) {
		return []string{"must be letters and digits, starting with a letter (a Kind, e.g. Stack)"}
	}
	return nil
}

// boundErrors returns what is wrong with a required field of at most max
// bytes.
func boundErrors(v string, max int) []string {
	switch {
	case v == "":
		return []string{"must be set"}
	case len(v) > max:
		return []string{validation.MaxLenError(max)}
	}
	return nil
}

// quoteBounded quotes v, cut to 64 bytes with its length when longer.
func quoteBounded(v string) string {
	const show = 64
	if len(v) <= show {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%q... (%d bytes)", v[:show], len(v))
}
