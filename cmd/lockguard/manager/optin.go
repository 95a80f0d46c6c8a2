package manager

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// optIn makes the resources grs of other groups protectable
// (docs/contract.md rule 21): resolved to kinds with discovery (an error
// names each that cannot be protected), accepted by Protectable
// process-wide, and served by kinds beside the group's, so that the
// reconciler's target watches and the owner index hold their metadata.
func optIn(disco discovery.DiscoveryInterface, kinds *readmodel.Kinds, grs []schema.GroupResource) error {
	gks, err := readmodel.ResolveOptIn(disco, grs)
	if err != nil {
		return err
	}
	if err := lockv1alpha1.SetOptedIn(gks); err != nil {
		return err
	}
	kinds.WithOptIn(grs)
	ctrl.Log.WithName("setup").Info("Protecting kinds of other groups by opt-in", "kinds", gks)
	return nil
}
