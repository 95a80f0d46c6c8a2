// Package peers lets a lockguard replica decide an allowed DELETE from its
// Lock cache alone whenever it can prove that the cache lacks no Lock of
// the target, and tells the webhook to confirm with the API server (the
// consistent list of webhook/reader.go) otherwise.
//
// # Why the cache can lack a Lock
//
// Lock.LiveTarget depends on the Lock alone and spec.targetRef is
// immutable (CEL), so the only event that turns protection on is a Lock
// CREATE: deleting a Lock only turns it off, and a cache that still holds
// a deleted Lock only errs towards denying. Every CREATE passes validating
// admission before the API server writes it to etcd (registry/generic
// Store.Create runs createValidation before Storage.Create, 1.29 and 1.37
// alike). lockguard admits every Lock CREATE (a webhook entry of its own,
// failurePolicy Fail; webhook/create.go, which announces each through
// Peers.AnnounceLock), so every replica that may answer a DELETE can be
// told about the Lock before its create can return to the client.
//
// # Pending markers
//
// Each replica keeps markers, target → UIDs of Lock creates it has been
// told about (name and UID are set before admission runs). A DELETE of a
// target with a marker, or any DELETE while the replica is cold, is
// confirmed with the API server as before; any other DELETE the cache
// would allow is allowed from the cache. A marker is removed when the
// replica's Lock informer delivers that UID (the informer's store holds
// the Lock before its handlers hear of it, and the webhook looks at the
// markers before the store, so a marker removed by the informer is seen
// in the store), or, once it is older than the TTL (longer than a create
// request can take), when a quorum GET of the Lock finds it absent or with
// another UID. Markers are bounded; past the bound the replica goes cold.
//
// # Peers
//
// Every replica serves the webhook, so the replica A that admits a create
// tells every other replica before allowing it:
//
//   - Each replica P subscribes to every peer A in its view (POST
//     /peers/subscribe) and renews every RenewEvery. A keeps a
//     subscription for Lease after it arrives; P trusts it for Trust <
//     Lease counted from when P sent the renewal, so P stops trusting
//     before A stops telling. A new subscription is answered with A's
//     admissions of the last TTL.
//   - To admit a Lock CREATE, A requires a live subscription from every
//     peer in its own view, marks the Lock itself, records it for replay,
//     delivers it to every live subscriber (POST /peers/pending) and
//     allows the create only when all acknowledged; otherwise it refuses
//     the create with a retryable message.
//   - P is warm, and decides from its cache, only while its Lock informer
//     has synced, it trusts a subscription to every peer in its view, and
//     it has listed all Locks from the API server (a consistent read) after
//     the last moment its chain of subscriptions broke (a start, a lapsed
//     or renewed-as-new subscription, a peer joining its view), marking
//     every UID its informer lacked. After an event that may have lost a
//     create (the process starting, a peer leaving its view while not
//     trusted, markers or a replay over their bounds), it stays cold for
//     TTL before that list: a create admitted by a replica P never heard
//     from has reached etcd by then, so the list sees it.
//
// # Who is a replica
//
// In a cluster (--peer-service), the view is the replicas that renew an
// identity Lease (Leases): each replica creates its Lease when its peer
// loop starts, renews it every sixth of its duration D, reads the group's
// Leases with a consistent list as often, and deletes its Lease when it
// stops. Another replica's Lease counts for D after the list that first
// showed its current version, so a pod that never ran the protocol is
// never waited for and a dead one is dropped D after its last renewal. A
// replica is warm, and admits creates, only while its own renewals have
// gone on without a gap for D/2 (Tracker.SelfFresh): then every other
// replica whose lists work has it in its view (Leases says why), so no
// replica admits a create without requiring its subscription, and no
// warm replica misses a replica that admits. After a gap it holds off for
// TTL, as at its start: the others may have dropped it meanwhile. The
// view may err: a replica that stays in it too long only stops creates,
// and one that leaves it while still subscribed is still told, since a
// replica delivers every create to every live subscription, whatever its
// view. A peers file or list (local runs) is taken as it is.
//
// This rests on one assumption: only the replicas write the group's
// Leases. A replica creates, renews and deletes its own, and deletes
// another's only once it stayed unchanged for three durations (its holder
// stopped being fresh two durations before). Anyone else who deletes or
// changes a replica's Lease drops it from the others' views at their next
// list while it still counts itself fresh: the others admit creates
// without it, and it decides deletes from a cache that lacks them. So the
// chart lets only lockguard write them: a principal needs the RBAC verb
// LeaseWriteVerb on leases (lockguard's ServiceAccount has it by the
// chart's Role; the built-in edit and admin roles and other controllers'
// Roles do not), checked by a ValidatingAdmissionPolicy where the API
// server serves them (1.30+) and by lockguard's own webhook entry before
// (NewLeaseGuard; lockguard's writes never reach it). A principal that
// holds every verb (a cluster admin) can still do it; then the replica
// whose renewal is answered NotFound or Conflict is cold at once and
// starts a new streak (cold for TTL, then a list), which bounds the
// window to one renewal interval (D/6) but does not close it.
//
// A Lease's holder counts only as an IP:port (netip), and a call's URL is
// built from its parts, so that no holder steers a call elsewhere.
//
// The namespace guard's label rides on the same admission: once every
// subscriber has acknowledged, A's webhook puts the label on the Lock's
// namespace before it allows the create (webhook.CreateOptions.Labeler),
// and the leader's reconciler, holding the marker too, does not take the
// label off while a create in that namespace is pending
// (Tracker.PendingIn). The label is
// then on from the moment the create returns. A leader that holds no
// marker of the create (its markers over their bound) may take the label
// off until the Lock reaches its cache: the milliseconds of lag there were
// before, in that rarer case.
//
// # Only evidence removes a marker
//
// A marker is keyed by its Lock's UID and the target it claims, and only
// evidence about that Lock removes it: the informer delivering the UID
// (which removes every mark of it), or, after TTL, a quorum read of the
// Lock the marker names (which removes that mark only). A create that
// this replica refuses keeps its marker and its place in the replay until
// then: a review can be forged, so a refusal proves nothing about a
// genuine create of the same UID, and a mark of a UID with another target
// cannot stand in for the genuine one. Whatever a caller sends, it can
// only add markers, which make deletes more careful, and only of Locks
// the API server could have admitted (lockv1alpha1.ValidateCreated, on
// the webhook's Lock creates, /peers/pending and a replay alike: names
// and namespaces as ValidateObjectMeta checks them, the CRD's bounds), so
// each marker is bounded and its quorum GET can answer NotFound; a marker
// that fails the check anyway is cleared by the sweep unread.
//
// # Only replicas call the peer endpoints
//
// /peers/subscribe and /peers/pending are mutual TLS: the webhook server
// asks every client for a certificate, and these endpoints accept only one
// that the replicas' CA signed for the webhook Service's name, that names
// client auth among its extended key usages (a certificate with none is
// refused, though crypto/x509 takes it as valid for any usage) and that
// carries the peer identity, the URI SAN certs.PeerURI
// (Config.Authenticate, certs.PeerTLS); any other leaf of the CA is not a
// replica. Each replica presents its serving certificate, which the
// chart's Certificate issues with both. Every call and answer carries
// ProtocolVersion. A replica subscribes only for its own address (the
// host it calls from) and only while the other's view lists it, so no
// caller can squat subscriptions or make creates wait for an address that
// does not answer. Without a CA the protocol does not start.
//
// # The create entry is checked, not trusted
//
// All of the above rests on every Lock CREATE passing lockguard's own
// webhook entry (CreateEntryName) with failurePolicy Fail. A replica
// watches that entry in its ValidatingWebhookConfiguration (EntryWatch)
// and is warm only while CheckCreateEntry finds it as the chart renders
// it: every Lock CREATE matched, failurePolicy Fail, nothing that could
// exclude a request, lockguard's Service and the path of Lock creates
// (Expectation: webhook.CreatePath in lockguard). Before it has
// seen the entry, and while the entry is missing or differs, the replica
// is cold. Valid again after a change, it holds off for TTL (a create
// that bypassed lockguard has reached etcd by then), then lists, as after
// a lost create. A change the watch may have missed (the configuration's
// generation, which the API server raises by one at each write of its
// webhooks, grew by more than one, or its UID changed) counts as a
// change. What the replica cannot see is an API server that has not
// loaded the current configuration yet.
//
// # Wiring
//
// New builds a replica's side of the protocol from one Config (the other
// replicas, TLS from certs.PeerTLS, the Lock index, the Lock-create
// entry, the tuning): a Peers, which the manager adds once as a Runnable
// and serves once as the handler of Paths. The webhook asks it
// (Peers.MayLack) before it trusts its cache, and the reconciler asks it
// whether a Lock create is pending in a namespace (Peers.PendingIn).
//
// # Files, one job each
//
//   - The replica's state, no I/O (Tracker): tracker.go (warm or cold),
//     markers.go (pending markers), view.go (the other replicas, and
//     whether this one counts as one), subscriptions.go (subscriptions,
//     held and sent).
//   - Who the replicas are: leases.go (identity Leases), leaseguard.go
//     (their webhook guard), source.go (a static list or a file).
//   - The Lock-create entry: entry.go (what a valid entry is),
//     entrywatch.go (its watch, and what the Tracker keeps of it).
//   - The protocol's I/O (Peers): peers.go (the Runnable and what the
//     webhook asks), calls.go (calls to the others), server.go (their
//     calls to this one), reads.go (reads of the API server: the list and
//     the sweep), new.go (the Config and New).
package peers
