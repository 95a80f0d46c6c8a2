package manager

import (
	"errors"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
	"github.com/navique/lockguard/webhook"
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

// optedInKind returns the resolution of an opted-in kind for the Lock
// create's labels (webhook.ProtectedTargetLabel, webhook.OptedInObjects):
// the kind as kinds serves it, when it is of gk's group and that group is
// not core.navique.com; false for any other, and for an opted-in kind no
// longer served (nothing of it to delete); an error when discovery fails
// for a kind the installation opts in, so that the create is refused,
// retryably, rather than allowed unlabelled.
func optedInKind(kinds *readmodel.Kinds) webhook.OptedInResolver {
	return func(gk schema.GroupKind) (schema.GroupVersionKind, bool, error) {
		if gk.Group == lockv1alpha1.Group {
			return schema.GroupVersionKind{}, false, nil
		}
		k, err := kinds.Lockable(gk.Kind)
		switch {
		case err == nil && k.GVK.GroupKind() == gk:
			return k.GVK, true, nil
		case err != nil && !errors.Is(err, readmodel.ErrKindNotServed) && lockv1alpha1.IsOptedIn(gk):
			return schema.GroupVersionKind{}, false, err
		}
		return schema.GroupVersionKind{}, false, nil
	}
}
