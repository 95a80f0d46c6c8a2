package lockctl

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestCreateRetrying: kubectl lock retries lockguard's retryable refusal
// of a Lock create (a replica could not be told yet), and nothing else.
func TestCreateRetrying(t *testing.T) {
	refused := apierrors.NewServiceUnavailable(fmt.Sprintf("admission webhook %q denied the request: %s: replica 10.0.0.7:9443 did not answer",
		"create.lockguard.core.navique.com", lockv1alpha1.CreateRefusedRetry))
	otherUnavailable := apierrors.NewServiceUnavailable("etcdserver: leader changed")
	cases := map[string]struct {
		reason  string
		errs    []error // the answers of the creates, in order; then nil
		timeout time.Duration
		calls   int // 0: not checked (it depends on the clock)
		want    error
	}{
		"RefusedThenCreated": {
			reason: "Two refusals, then the create goes through.",
			errs:   []error{refused, refused}, timeout: time.Minute, calls: 3,
		},
		"OtherError": {
			reason: "Any other error, even a 503, is returned at once.",
			errs:   []error{otherUnavailable}, timeout: time.Minute, calls: 1, want: otherUnavailable,
		},
		"Timeout": {
			reason: "Refused until the timeout: the last refusal is returned.",
			errs:   []error{refused, refused, refused, refused, refused, refused, refused, refused}, timeout: 250 * time.Millisecond, want: refused,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			calls := 0
			err := CreateRetrying(context.Background(), tc.timeout, func(context.Context) error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			if !errors.Is(err, tc.want) && err != tc.want {
				t.Errorf("%s\nCreateRetrying(...) = %v, want %v", tc.reason, err, tc.want)
			}
			if tc.calls != 0 && calls != tc.calls {
				t.Errorf("%s\ncreates sent: %d, want %d", tc.reason, calls, tc.calls)
			}
		})
	}
}
