package manager

import (
	"net/http"

	"github.com/navique/lockguard/certs"
)

// ReviewCallerOptions make the admission review paths (webhook.Path,
// webhook.CreatePath, webhook.UpdatePath, webhook.UnlockPath,
// webhook.ExceptionPath, peers.LeaseGuardPath) answer
// only a caller with a client certificate of a CA (certs.ReviewCallers):
// the API server, once its AdmissionConfiguration presents one to
// lockguard's webhook. The peer paths check their own callers. Zero: off, every caller that
// reaches the port is answered (docs/hostile-clients.md, Forged reviews).
type ReviewCallerOptions struct {
	// CAFile holds the CA of the caller's client certificate; empty: off.
	CAFile string
	// Name, when set, is a DNS name the certificate must hold.
	Name string
}

// wrapper returns what the review paths' handlers are served behind:
// nothing when the option is off.
func (o ReviewCallerOptions) wrapper() (func(http.Handler) http.Handler, error) {
	if o.CAFile == "" {
		return func(h http.Handler) http.Handler { return h }, nil
	}
	callers, err := certs.NewReviewCallers(o.CAFile, o.Name)
	if err != nil {
		return nil, err
	}
	return callers.Require, nil
}
