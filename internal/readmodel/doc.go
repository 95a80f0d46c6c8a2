// Package readmodel is what lockguard reads to decide: the informer cache
// of every replica and the indexes on it. It is read by the admission
// webhook, the reconciler and the peer protocol alike, and written only by
// the API server's watches, never by lockguard itself.
//
//   - The Lock index (LockIndex): live Locks by target, by target kind
//     and by namespace, on the Lock informer (index.go).
//   - The owner index (OwnerIndex): the objects of the group's namespaced
//     kinds by the UIDs their ownerReferences name, for the cascade guard
//     (owners.go).
//   - Kind discovery (Kinds, Discovery): the group's kinds as the API
//     server serves them, spelled exactly as served, and the runnable that
//     adds each to the owner index on every replica (kinds.go,
//     discovery.go).
//   - The cache's transform (CacheTransform), which keeps of each object
//     only what the indexes and the reconciler read (transform.go), and
//     its informers (NewInformerFunc: cachestore.Informer), whose lists and
//     watches ride out an API server restart (listwatch.go) and whose
//     lists go into their stores object by object as they arrive.
//   - The label keys the cache keeps of namespaced objects (LabelKeys:
//     lockguard's own and those the namespace's selector Locks read), and
//     the refresh of a namespace when a Lock reads a new one
//     (labelkeys.go).
//   - What a selector ClusterLock selects now (ClusterSelected), read
//     from the API server by the ClusterLock create's admission and by
//     the reconciler alike (clusterselected.go).
//
// It is called a read model because that is its one role: the state the
// decisions are read from, kept apart from the code that decides (webhook)
// and the code that writes annotations, labels and status (controller).
// Neither of those packages owns it, so the webhook never depends on the
// reconciler's package, and kind discovery, which the cascade guard needs
// on every replica, runs there as its own runnable while the reconciler
// runs on the leader alone.
package readmodel
