package manager

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// selfIdentity learns lockguard's own username from the API server with a
// SelfSubjectReview (authentication.k8s.io/v1, GA since Kubernetes 1.28;
// every authenticated user may create one, so it needs no RBAC), so that
// the update guard exempts lockguard's own writes (its reconciler's label
// and annotation patches) whatever the chart's matchConditions say. It runs
// on every replica, and retries until it succeeds: until then Username is
// "" and only the configured principals are exempt.
type selfIdentity struct {
	client   client.Client
	username atomic.Pointer[string]
}

// selfRetry is how often selfIdentity asks again after a failure.
const selfRetry = 2 * time.Second

// Username returns lockguard's username, "" while it is not known.
func (s *selfIdentity) Username() string {
	if u := s.username.Load(); u != nil {
		return *u
	}
	return ""
}

// NeedLeaderElection is false: every replica serves the update guard.
func (s *selfIdentity) NeedLeaderElection() bool { return false }

// Start asks until it knows, or ctx is done.
func (s *selfIdentity) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("self-identity")
	err := wait.PollUntilContextCancel(ctx, selfRetry, true, func(ctx context.Context) (bool, error) {
		user, err := s.review(ctx)
		if err != nil {
			log.Error(err, "Cannot learn lockguard's own username; retrying")
			return false, nil
		}
		s.username.Store(&user)
		log.Info("lockguard's own updates are exempt from ReadOnly Locks", "username", user)
		return true, nil
	})
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// review creates one SelfSubjectReview and returns the username in it.
func (s *selfIdentity) review(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r := &authenticationv1.SelfSubjectReview{}
	if err := s.client.Create(ctx, r); err != nil {
		return "", fmt.Errorf("creating a SelfSubjectReview: %w", err)
	}
	if r.Status.UserInfo.Username == "" {
		return "", errors.New("the SelfSubjectReview names no user")
	}
	return r.Status.UserInfo.Username, nil
}
