package lockctl

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Locks that expire (docs/contract.md rule 19): kubectl lock's --for and
// --until, and how the plugin shows an expiry.

// addExpiryFlags registers --for and --until on cmd.
func addExpiryFlags(cmd *cobra.Command, o *lockOptions) {
	cmd.Flags().DurationVar(&o.forDuration, "for", 0, "Let the Lock expire after this long (72h, 90m): its spec.expiresAt, rounded up to the second. Default: it never expires.")
	cmd.Flags().StringVar(&o.until, "until", "", "Let the Lock expire at this time, RFC 3339 (2026-12-07T06:00:00Z): its spec.expiresAt. Default: it never expires.")
}

// expiry returns the expiresAt that --for or --until ask for, counted
// from now; nil for neither (--for 0 is neither). Both, a negative --for, or a
// --until that does not parse or is not after now, are errors.
func (o *lockOptions) expiry(now time.Time) (*metav1.Time, error) {
	switch {
	case o.forDuration != 0 && o.until != "":
		return nil, fmt.Errorf("give --for or --until, not both")
	case o.forDuration < 0:
		return nil, fmt.Errorf("--for %s: the duration must be positive", o.forDuration)
	case o.forDuration > 0:
		t := now.Add(o.forDuration)
		if c := t.Truncate(time.Second); !c.Equal(t) {
			t = c.Add(time.Second) // The API keeps whole seconds: never shorter than asked.
		}
		m := metav1.NewTime(t.UTC())
		return &m, nil
	case o.until != "":
		t, err := time.Parse(time.RFC3339, o.until)
		if err != nil {
			return nil, fmt.Errorf("--until %q is not an RFC 3339 time (for example 2026-12-07T06:00:00Z): %w", o.until, err)
		}
		if !t.After(now) {
			return nil, fmt.Errorf("--until %s is not in the future: a Lock that has already expired protects nothing", o.until)
		}
		if c := t.Truncate(time.Second); !c.Equal(t) {
			t = c.Add(time.Second)
		}
		m := metav1.NewTime(t.UTC())
		return &m, nil
	}
	return nil, nil
}

// expiresText shows a Lock's expiry: its expiresAt (RFC 3339, UTC), or
// "never".
func expiresText(l *lockv1alpha1.Lock) string {
	if s := l.ExpiresAtString(); s != "" {
		return s
	}
	return "never"
}

// expiryNote is what kubectl lock adds to its confirmation of a Lock that
// expires.
func expiryNote(l *lockv1alpha1.Lock) string {
	if l.Spec.ExpiresAt == nil {
		return ""
	}
	return fmt.Sprintf(", or until it expires at %s", l.ExpiresAtString())
}

// expiresCell is the EXPIRES cell of kubectl lock list for l as of now:
// "2026-12-07T06:00:00Z (in 2d23h)", "2026-12-03T17:00:00Z (5m ago)", or
// <none> for a Lock that never expires.
func expiresCell(l *lockv1alpha1.Lock, now time.Time) string {
	if l.Spec.ExpiresAt == nil {
		return "<none>"
	}
	if l.ExpiredAt(now) {
		return fmt.Sprintf("%s (%s ago)", l.ExpiresAtString(), duration.HumanDuration(now.Sub(l.Spec.ExpiresAt.Time)))
	}
	return fmt.Sprintf("%s (in %s)", l.ExpiresAtString(), duration.HumanDuration(l.Spec.ExpiresAt.Sub(now)))
}
