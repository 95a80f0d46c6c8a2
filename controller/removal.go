package controller

import (
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Removals of what protects an object. lockguard's labels that route an
// object's requests to a guard (HasLocksLabel on namespaces,
// ProtectedLabel, ClusterLockedLabel, ReadOnlyLabel on cluster-scoped
// objects) are put on by a create's admission before it is allowed, and
// taken off by the reconciler from what it read: every such removal, and
// that of a pending mark, is a guardedRemoval, so that a create admitted
// after the read is never undone.

// guardedRemoval is the merge patch of metadata md (what it removes: a
// protection label, a pending mark) on an object still at resourceVersion
// rv, the version a pass judged from. A removal of what protects an
// object must not undo a create's label written since that read (the
// create admitted, the pass working from the read before it): with rv the
// API server refuses such a patch (Conflict) and the next pass judges the
// object again, its pending mark in view.
func guardedRemoval(rv string, md map[string]any) client.Patch {
	md["resourceVersion"] = rv
	data, _ := json.Marshal(map[string]any{"metadata": md})
	return client.RawPatch(types.MergePatchType, data)
}

// conflictRecheck is how soon a pass comes back after a removal the API
// server refused because the object changed since the pass read it.
const conflictRecheck = time.Second

// soonerOf returns the sooner of two requeue delays, 0 being none.
func soonerOf(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}
