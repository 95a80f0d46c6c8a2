package manager

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/webhook"
)

// lister is a webhook.LockLister that answers err.
type lister struct{ err error }

func (l lister) List(context.Context, client.ObjectList, ...client.ListOption) error { return l.err }

func TestLockReadsReady(t *testing.T) {
	cases := map[string]struct {
		synced  bool
		live    webhook.LockLister
		wantErr string
	}{
		"Synced":                 {synced: true, live: lister{errors.New("must not be read")}},
		"SyncedCacheOnly":        {synced: true},
		"APIServerReadable":      {live: lister{}},
		"APIServerUnreadable":    {live: lister{errors.New("connection refused")}, wantErr: "the Lock cache has not synced, and the API server's Locks cannot be read: connection refused"},
		"CacheOnlyWaitsForCache": {wantErr: "the Lock cache has not synced (with --cache-only-decisions"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var live webhook.LockLister
			if tc.live != nil {
				live = tc.live
			}
			err := lockReadsReady(func() bool { return tc.synced }, live)(httptest.NewRequest("GET", "/readyz", nil))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("ready check: %v, want ready", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Errorf("ready check: %v, want an error starting %q", err, tc.wantErr)
			}
		})
	}
}
