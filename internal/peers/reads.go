package peers

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// apiTimeout bounds each read of the API server by the peer loop (a page
// of the list that makes a replica warm, a GET of the sweep), so that a
// stuck read never stops the loop.
const apiTimeout = 30 * time.Second

// maxSweep bounds the quorum GETs of one sweep of old markers.
const maxSweep = 200

// listPageSize is the page size of the list of all Locks a replica makes
// before it is warm.
const listPageSize = 500

// list lists all Locks from the API server (a consistent read, paginated)
// and marks those the cache lacks; the list counts if it started after
// the chain last broke.
func (p *Peers) list(ctx context.Context) {
	p.listActive.Lock()
	defer p.listActive.Unlock()
	started := p.t.Now()
	cont := ""
	for {
		var page lockv1alpha1.LockList
		pctx, cancel := context.WithTimeout(ctx, apiTimeout)
		err := p.api.List(pctx, &page, client.Limit(listPageSize), client.Continue(cont))
		cancel()
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("Could not list the Locks to become warm; retrying", "error", err.Error())
			return
		}
		for i := range page.Items {
			if a, ok := AnnouncementOf(&page.Items[i]); ok {
				p.t.Mark(a)
			}
		}
		if cont = page.Continue; cont == "" {
			break
		}
	}
	p.t.Listed(started)
}

// sweep reads each marker older than TTL from the API server (a quorum
// GET: no resourceVersion) and clears it when its Lock is absent or has
// another UID, or the cache holds it; a marker that no Lock could match
// (validate) is cleared unread. A GET that fails otherwise keeps the
// marker: the Lock may exist and the cache lack it (fail closed).
func (p *Peers) sweep(ctx context.Context) {
	expired := p.t.Expired()
	// Bounded per pass: the rest stay marked (their deletes confirmed)
	// until a later pass.
	for _, a := range expired[:min(len(expired), maxSweep)] {
		if a.validate() != nil {
			// No Lock can have its name, namespace or target (a marker
			// of a replica before issue 36, or of a peer that marked
			// without this check): nothing to read, and its GET would
			// fail without NotFound for good.
			p.t.Clear(a)
			continue
		}
		var l lockv1alpha1.Lock
		gctx, cancel := context.WithTimeout(ctx, apiTimeout)
		err := p.api.Get(gctx, types.NamespacedName{Namespace: a.Namespace, Name: a.Name}, &l)
		cancel()
		switch {
		case apierrors.IsNotFound(err), err == nil && l.UID != a.UID:
			p.t.Clear(a)
		case err == nil && p.t.cache.HasUID(a.Namespace, a.Name, a.UID):
			p.t.Clear(a)
		case err != nil:
			ctrl.LoggerFrom(ctx).V(1).Info("Could not read a pending Lock; keeping its marker", "namespace", a.Namespace, "name", a.Name, "error", err.Error())
		}
	}
}
