package v1alpha1

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestActiveMessage: the Ready message of an active Lock, as lockguard
// has always written it (controller.ActiveMessage before issue 38 moved
// it here).
func TestActiveMessage(t *testing.T) {
	expires := metav1.NewTime(time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC))
	for _, tc := range []struct {
		lock Lock
		want string
	}{
		{Lock{Spec: LockSpec{TargetRef: TargetReference{Kind: "Stack", Name: "web"}}},
			`deleting Stack "web" is denied while this Lock exists`},
		{Lock{Spec: LockSpec{TargetRef: TargetReference{Kind: "Stack", Name: "web"}, Reason: "prod"}},
			`deleting Stack "web" is denied while this Lock exists: prod`},
		{Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}, Spec: LockSpec{Selector: &LockSelector{}, ExpiresAt: &expires}},
			`deleting namespace "team-a" or any resource in it is denied while this Lock exists, until it expires at 2027-01-02T03:04:05Z`},
		{Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}, Spec: LockSpec{Selector: &LockSelector{MatchLabels: map[string]string{"app": "web"}}, Reason: "prod"}},
			`deleting the resources of namespace "team-a" that this Lock's selector matches is denied while this Lock exists: prod`},
	} {
		if got := tc.lock.ActiveMessage(); got != tc.want {
			t.Errorf("ActiveMessage() = %q, want %q", got, tc.want)
		}
	}
}

// activeMessageSprintf is ActiveMessage as fmt.Sprintf wrote it before
// it was built in one buffer: the reference of TestActiveMessageAsSprintf.
func activeMessageSprintf(l *Lock) string {
	var msg string
	switch s := l.Spec.Selector; {
	case s == nil:
		msg = fmt.Sprintf("deleting %s %q is denied while this Lock exists", l.Spec.TargetRef.Kind, l.Spec.TargetRef.Name)
	case s.IsEmpty():
		msg = fmt.Sprintf("deleting namespace %q or any resource in it is denied while this Lock exists", l.Namespace)
	default:
		msg = fmt.Sprintf("deleting the resources of namespace %q that this Lock's selector matches is denied while this Lock exists", l.Namespace)
	}
	end := ""
	if l.Spec.ExpiresAt != nil {
		end += ", until it expires at " + l.ExpiresAtString()
	}
	if l.Spec.Reason != "" {
		end += ": " + l.Spec.Reason
	}
	return msg + end
}

// TestActiveMessageAsSprintf compares ActiveMessage with fmt's on names,
// namespaces and reasons of every kind of byte (quotes, backslashes,
// control characters, invalid UTF-8, runes outside ASCII).
func TestActiveMessageAsSprintf(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", "0", "-", ".", `"`, `\`, "\n", "\t", "\x00", "\x7f", "\xff", "é", "日", "\u2028", " ", "'", "%", "%q"}
	text := func() string {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	expires := metav1.NewTime(time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC))
	for i := range 3000 {
		l := Lock{ObjectMeta: metav1.ObjectMeta{Namespace: text()}, Spec: LockSpec{TargetRef: TargetReference{Kind: text(), Name: text()}, Reason: text()}}
		switch i % 3 {
		case 1:
			l.Spec.Selector = &LockSelector{}
		case 2:
			l.Spec.Selector = &LockSelector{MatchLabels: map[string]string{"app": "web"}}
		}
		if i%2 == 0 {
			l.Spec.ExpiresAt = &expires
		}
		if got, want := l.ActiveMessage(), activeMessageSprintf(&l); got != want {
			t.Fatalf("ActiveMessage() = %q, fmt's %q", got, want)
		}
		wantEnd := strings.TrimPrefix(activeMessageSprintf(&l), activeMessageSprintf(&Lock{ObjectMeta: l.ObjectMeta, Spec: LockSpec{TargetRef: l.Spec.TargetRef, Selector: l.Spec.Selector}}))
		if got := l.ActiveMessageEnd(); got != wantEnd {
			t.Fatalf("ActiveMessageEnd() = %q, want %q", got, wantEnd)
		}
	}
}

// BenchmarkActiveMessage: the message of a targetRef Lock with a reason
// and an expiry, made again for each copy of a cached Lock.
func BenchmarkActiveMessage(b *testing.B) {
	expires := metav1.NewTime(time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC))
	l := Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}, Spec: LockSpec{TargetRef: TargetReference{Kind: "Stack", Name: "web"}, Reason: "production database", ExpiresAt: &expires}}
	for _, c := range []struct {
		name string
		fn   func(*Lock) string
	}{{"buffer", (*Lock).ActiveMessage}, {"sprintf", activeMessageSprintf}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = c.fn(&l)
			}
		})
	}
}
