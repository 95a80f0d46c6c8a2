package certs

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
)

// ReviewCallers authenticates the caller of the admission review paths
// (docs/contract.md rule 17): the API server, when its admission
// configuration presents a client certificate to lockguard's webhook (a
// kubeConfigFile user for the webhook Service in its
// AdmissionConfiguration). A review carries the requesting user as its
// caller claims it, so nothing in the review can prove who sent it; the
// certificate can. Without it, anyone who reaches the webhook port can
// send a forged review and read the denial (docs/hostile-clients.md says what it
// learns).
type ReviewCallers struct {
	ca *CAPool
	// name, when set, is a DNS name the certificate must hold.
	name string
}

// NewReviewCallers returns the check of review callers whose client
// certificates the CA in caFile signed (read again when the file
// changes), for client auth and, when name is not empty, for that DNS
// name (a subject alternative name of the certificate).
func NewReviewCallers(caFile, name string) (*ReviewCallers, error) {
	ca, err := NewCAPool(caFile)
	if err != nil {
		return nil, fmt.Errorf("the review callers' CA: %w", err)
	}
	return &ReviewCallers{ca: ca, name: name}, nil
}

// ReviewCallerRefusal starts every refusal of Verify: helm test's
// check-webhook recognises lockguard's refusal by it.
const ReviewCallerRefusal = "lockguard answers admission reviews only from a caller with a client certificate"

// Verify returns nil when r comes with a client certificate that the CA
// signed for client auth (and for the name, when set).
func (v *ReviewCallers) Verify(r *http.Request) error {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return errors.New(ReviewCallerRefusal + " (--review-client-ca); this call has none")
	}
	if err := v.ca.verify(r.TLS.PeerCertificates, v.name, x509.ExtKeyUsageClientAuth); err != nil {
		return fmt.Errorf(ReviewCallerRefusal+" of --review-client-ca: %w", err)
	}
	return nil
}

// Require returns h behind Verify: a call that fails it is answered 403
// with the reason, before its body is read, and h never sees it.
func (v *ReviewCallers) Require(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := v.Verify(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
