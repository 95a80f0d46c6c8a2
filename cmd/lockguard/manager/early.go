package manager

import (
	"context"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// beforeCaches is a runnable the manager starts with its webhook servers,
// before it waits for its caches to sync: controller-runtime starts, in
// order, its HTTP servers, its webhook servers, its caches (and waits for
// them to sync), and only then every other runnable. The peer protocol
// decides the readiness check "peers", and the readiness of a replica
// must not wait for its caches (issue 38: at 100,000 Locks their sync
// took 17.5 s, and /readyz with it); its runnable uses no cache until it
// has synced (peers.Tracker reads HasSynced).
//
// It is a webhook.Server only so that the manager files it with them: it
// serves nothing, and Register must not be called.
type beforeCaches struct {
	manager.Runnable
}

var _ webhook.Server = beforeCaches{}

// NeedLeaderElection is false: it runs on every replica, as the webhook
// servers do.
func (beforeCaches) NeedLeaderElection() bool { return false }

// Register panics: nothing is served through it.
func (beforeCaches) Register(path string, _ http.Handler) {
	panic("beforeCaches serves nothing; register " + path + " with the manager's webhook server")
}

// StartedChecker is always ready: the runnable's own checks say more.
func (beforeCaches) StartedChecker() healthz.Checker { return healthz.Ping }

// WebhookMux is nil: it serves nothing.
func (beforeCaches) WebhookMux() *http.ServeMux { return nil }

// Start runs the runnable.
func (b beforeCaches) Start(ctx context.Context) error { return b.Runnable.Start(ctx) }
