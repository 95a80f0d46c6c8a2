package v1alpha1

import "strconv"

// ActiveMessage is the message of the Ready condition of an active Lock:
// what it denies, until when if it expires, and its spec.reason if it
// gives one. lockguard's reconciler writes it (a ClusterLock's begins
// otherwise, and ends with ActiveMessageEnd), and its cache keeps a Lock's
// Ready message only when it is another (issue 38), making it again for
// each copy of the Lock it gives: it is built in one buffer, names quoted
// as fmt's %q quotes them (TestActiveMessageAsSprintf).
func (l *Lock) ActiveMessage() string {
	const while = " is denied while this Lock exists"
	b := make([]byte, 0, 96+len(l.Spec.TargetRef.Kind)+len(l.Spec.TargetRef.Name)+len(l.Namespace)+len(l.Spec.Reason))
	switch s := l.Spec.Selector; {
	case s == nil:
		b = append(append(b, "deleting "...), l.Spec.TargetRef.Kind...)
		b = strconv.AppendQuote(append(b, ' '), l.Spec.TargetRef.Name)
		b = append(b, while...)
	case s.IsEmpty():
		b = strconv.AppendQuote(append(b, "deleting namespace "...), l.Namespace)
		b = append(b, " or any resource in it"+while...)
	default:
		b = strconv.AppendQuote(append(b, "deleting the resources of namespace "...), l.Namespace)
		b = append(b, " that this Lock's selector matches"+while...)
	}
	return string(l.appendActiveMessageEnd(b))
}

// ActiveMessageEnd is how the Ready message of an active Lock or
// ClusterLock ends: its expiry, if it has one, and its spec.reason, if it
// gives one.
func (l *Lock) ActiveMessageEnd() string { return string(l.appendActiveMessageEnd(nil)) }

// appendActiveMessageEnd appends ActiveMessageEnd to b.
func (l *Lock) appendActiveMessageEnd(b []byte) []byte {
	if l.Spec.ExpiresAt != nil {
		b = l.appendExpiresAt(append(b, ", until it expires at "...))
	}
	if l.Spec.Reason != "" {
		b = append(append(b, ": "...), l.Spec.Reason...)
	}
	return b
}
