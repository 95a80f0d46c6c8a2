package v1alpha1

import "fmt"

// ActiveMessage is the message of the Ready condition of an active Lock:
// what it denies, until when if it expires, and its spec.reason if it
// gives one. lockguard's reconciler writes it (a ClusterLock's begins
// otherwise, and ends with ActiveMessageEnd), and its cache keeps a Lock's
// Ready message only when it is another (issue 38).
func (l *Lock) ActiveMessage() string {
	var msg string
	switch s := l.Spec.Selector; {
	case s == nil:
		msg = fmt.Sprintf("deleting %s %q is denied while this Lock exists", l.Spec.TargetRef.Kind, l.Spec.TargetRef.Name)
	case s.IsEmpty():
		msg = fmt.Sprintf("deleting namespace %q or any resource in it is denied while this Lock exists", l.Namespace)
	default:
		msg = fmt.Sprintf("deleting the resources of namespace %q that this Lock's selector matches is denied while this Lock exists", l.Namespace)
	}
	return msg + l.ActiveMessageEnd()
}

// ActiveMessageEnd is how the Ready message of an active Lock or
// ClusterLock ends: its expiry, if it has one, and its spec.reason, if it
// gives one.
func (l *Lock) ActiveMessageEnd() string {
	var end string
	if l.Spec.ExpiresAt != nil {
		end += ", until it expires at " + l.ExpiresAtString()
	}
	if l.Spec.Reason != "" {
		end += ": " + l.Spec.Reason
	}
	return end
}
