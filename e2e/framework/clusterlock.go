package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// WaitClusterLock waits until ClusterLock name's Ready reason is reason,
// its message holds says, and status.active is true for Active only.
func (k *Kube) WaitClusterLock(t *testing.T, name, reason, says string) {
	t.Helper()
	Eventually(t, DefaultTimeout, "ClusterLock "+name+" "+reason, func(ctx context.Context) error {
		var cl lockv1alpha1.ClusterLock
		if err := k.Client.Get(ctx, client.ObjectKey{Name: name}, &cl); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cl.Status.Conditions, lockv1alpha1.ConditionReady)
		if c == nil || c.Reason != reason || !strings.Contains(c.Message, says) || cl.Status.Active != (reason == lockv1alpha1.ReasonActive) {
			return fmt.Errorf("status %+v; want Ready reason %s with %q", cl.Status, reason, says)
		}
		return nil
	})
}
