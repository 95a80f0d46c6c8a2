//go:build e2e

package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
)

// leaseDeleter, when $LOCKGUARD_E2E_LEASE_DELETER is "edit", deletes the
// replicas' identity Leases as they appear, as a user bound to the
// built-in edit ClusterRole in their namespace (issue 36: without the
// chart's rule, each replica's view loses the others while it stays
// warm), until the test ends; then it reports how many deletes were
// refused with the chart's message and fails the test if one went
// through. It does nothing otherwise.
func leaseDeleter(t *testing.T) {
	t.Helper()
	if envOr("LOCKGUARD_E2E_LEASE_DELETER", "") != "edit" {
		return
	}
	ns := framework.ServiceAccountNamespace
	editor := kube.EditUser(t, s.cfg, ns, "lease-deleter", &coordinationv1.LeaseList{})
	want := peers.LeaseGuardMessage(ns)
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg                       sync.WaitGroup
		refused, deleted, failed int
		lastFailure              error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var list coordinationv1.LeaseList
			if err := editor.List(ctx, &list, client.InNamespace(ns), client.HasLabels{peers.LeaseGroupLabel}); err == nil {
				for i := range list.Items {
					err := editor.Delete(ctx, &list.Items[i])
					switch {
					case err == nil:
						deleted++
					case apierrors.IsForbidden(err) && strings.Contains(err.Error(), want):
						refused++
					case ctx.Err() == nil && !apierrors.IsNotFound(err):
						failed, lastFailure = failed+1, err
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		report(t, "identity Leases deleted as an edit user while it ran: %d deletes refused, %d went through, %d failed otherwise (last: %v)", refused, deleted, failed, lastFailure)
		if deleted > 0 {
			t.Errorf("an edit user deleted %d identity Leases: the chart's rule is missing", deleted)
		}
	})
}
