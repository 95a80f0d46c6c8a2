package lockctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// How kubectl lock waits for lockguard: it retries lockguard's retryable
// refusals of a create (CreateRetrying), then waits until the Lock is
// active (waitActive).

// CreateRetrying calls create until it succeeds, fails otherwise than with
// one of lockguard's retryable refusals (lockv1alpha1.CreateRefusedRetry:
// a replica could not be told about the Lock yet;
// lockv1alpha1.TargetLabelRefusedRetry: a label could not be written
// first), or timeout has passed, waiting
// 100 ms to 2 s between tries; it returns the last error. kubectl lock and
// the e2e harness create Locks through it.
func CreateRetrying(ctx context.Context, timeout time.Duration, create func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := create(ctx)
		if !isCreateRefused(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// isCreateRefused reports whether err is one of lockguard's retryable
// refusals of a Lock create: a replica not told of it yet, or a label it
// could not write first.
func isCreateRefused(err error) bool {
	return apierrors.IsServiceUnavailable(err) &&
		(strings.Contains(err.Error(), lockv1alpha1.CreateRefusedRetry) || strings.Contains(err.Error(), lockv1alpha1.TargetLabelRefusedRetry))
}

// waitActive waits until lockguard reports the Lock active for its current
// generation (status.active and Ready=True), which means a delete of its
// target is denied, and, for a ReadOnly Lock, its freeze in force
// (freezeState), which means updates of what it covers are refused too.
// A Lock in Audit enforcement is done once lockguard reports it live
// (Ready, reason Audit). An InvalidTarget Lock fails at once, and so does
// a ReadOnly Lock whose lockguard serves no update guard (it would never
// be in force), a ClusterLock whose guard is off (GuardDisabled), and one
// whose target lockguard may not label (LabelForbidden). gr
// names the Lock's kind in messages: Locks or ClusterLocks.
func waitActive(ctx context.Context, locks lockClient, gr schema.GroupResource, name string, timeout time.Duration) (*lockv1alpha1.Lock, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *lockv1alpha1.Lock
	for {
		l, err := getLock(ctx, locks, name)
		switch {
		case err == nil:
			last = l
			switch st := lockStatus(l); st {
			case statusActive:
				switch state, msg := freezeState(l); state {
				case freezeOff:
					return nil, fmt.Errorf("%s/%s is active (deleting what it covers is denied), but its freeze is never in force: %s", gr, name, msg)
				case freezePending:
				default:
					return l, nil
				}
			case lockv1alpha1.ReasonAudit:
				// docs/contract.md rule 20: live, refusing nothing; nor is a
				// ReadOnly one's freeze ever in force.
				return l, nil
			case lockv1alpha1.ReasonInvalidTarget:
				return nil, fmt.Errorf("%s/%s cannot protect its target: %s", gr, name, readyMessage(l))
			case lockv1alpha1.ReasonGuardDisabled:
				// A ClusterLock's (docs/clusterlock.md): nothing enforces it.
				return nil, fmt.Errorf("%s/%s protects nothing: %s", gr, name, readyMessage(l))
			case lockv1alpha1.ReasonLabelForbidden:
				// A ClusterLock's (docs/clusterlock.md): lockguard may not
				// label its target; waiting changes nothing until someone
				// who may runs the command the message gives.
				return nil, fmt.Errorf("%s/%s does not protect until its target is labelled: %s", gr, name, readyMessage(l))
			case lockv1alpha1.ReasonExpired:
				return nil, fmt.Errorf("%s/%s has expired: %s", gr, name, readyMessage(l))
			}
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		default:
			return nil, err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				return nil, fmt.Errorf("waiting for %s/%s: %w", gr, name, ctx.Err())
			}
			if lockStatus(last) == statusActive {
				// Active, but the freeze is pending.
				_, msg := freezeState(last)
				return nil, fmt.Errorf("%s/%s is active (deleting what it covers is denied), but its freeze is not in force after %s: %s", gr, name, timeout, msg)
			}
			return nil, fmt.Errorf("%s/%s is not active after %s: %s (is lockguard running?)", gr, name, timeout, describeStatus(last))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
