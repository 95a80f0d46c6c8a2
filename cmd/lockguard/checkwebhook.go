package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/navique/lockguard/certs"
	"github.com/navique/lockguard/webhook"
)

// checkWebhookCommand is the subcommand that checks that a lockguard webhook
// server answers (the chart's helm test runs it: the image has nothing but
// the lockguard binary).
const checkWebhookCommand = "check-webhook"

// checkWebhook runs `lockguard check-webhook`: it sends the webhook at --url
// an AdmissionReview of a server-side dry-run DELETE of an object no Lock
// can target (a kind and name made up for the check, so the answer must be
// an allow, and a dry run records nothing), over TLS verified with the CA
// of --ca-file or --ca-bundle, and returns nil when lockguard allows it
// with the review's UID. Any other outcome (no TLS, another server, an
// error answer, a denial) is an error. With --want-client-cert-required
// (the webhook runs with --review-client-ca), it returns nil only when
// lockguard refuses the review, which carries no client certificate, with
// its 403: the check cannot present the API server's certificate.
func checkWebhook(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("lockguard "+checkWebhookCommand, flag.ContinueOnError)
	var (
		rawURL    = fs.String("url", "", "URL of the webhook, e.g. https://lockguard-webhook.lockguard-system.svc:443"+webhook.Path+" (required).")
		caFile    = fs.String("ca-file", "", "PEM file of the CA that signed the webhook's serving certificate.")
		caBundle  = fs.String("ca-bundle", "", "Base64-encoded PEM of that CA, instead of --ca-file.")
		namespace = fs.String("namespace", "default", "Namespace of the made-up object the review is about.")
		timeout   = fs.Duration("timeout", 10*time.Second, "How long to wait for the answer.")
		certOnly  = fs.Bool("want-client-cert-required", false, "The webhook answers reviews only from callers with a client certificate (--review-client-ca): succeed only when it refuses this check's review, which has none, with lockguard's 403.")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	u, err := url.Parse(*rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("--url %q: want an https URL of the webhook", *rawURL)
	}
	var caPEM []byte
	switch {
	case *caFile != "" && *caBundle != "":
		return errors.New("--ca-file and --ca-bundle are exclusive")
	case *caFile != "":
		if caPEM, err = os.ReadFile(*caFile); err != nil {
			return err
		}
	case *caBundle != "":
		if caPEM, err = base64.StdEncoding.DecodeString(*caBundle); err != nil {
			return fmt.Errorf("--ca-bundle: %w", err)
		}
	default:
		return errors.New("--ca-file or --ca-bundle is required: the check verifies the webhook's serving certificate")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return errors.New("no PEM certificate in the CA given")
	}

	uid, err := randomUID()
	if err != nil {
		return err
	}
	review := &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:         types.UID(uid),
			Kind:        metav1.GroupVersionKind{Group: "core.navique.com", Version: "v1alpha1", Kind: "LockguardCheck"},
			Resource:    metav1.GroupVersionResource{Group: "core.navique.com", Version: "v1alpha1", Resource: "lockguardchecks"},
			Name:        "lockguard-check-" + uid[:8],
			Namespace:   *namespace,
			Operation:   admissionv1.Delete,
			UserInfo:    authenticationv1.UserInfo{Username: "lockguard-check-webhook"},
			DryRun:      ptr(true),
			RequestKind: &metav1.GroupVersionKind{Group: "core.navique.com", Version: "v1alpha1", Kind: "LockguardCheck"},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}}
	defer hc.CloseIdleConnections()
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("the webhook did not answer: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("reading the webhook's answer: %w", err)
	}
	if *certOnly {
		return checkClientCertRequired(stdout, u, resp.StatusCode, data, time.Since(start))
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the webhook answered HTTP %d: %.200s", resp.StatusCode, data)
	}
	var answer admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &answer); err != nil {
		return fmt.Errorf("the webhook's answer is not an AdmissionReview: %w: %.200s", err, data)
	}
	r := answer.Response
	switch {
	case r == nil:
		return fmt.Errorf("the webhook's answer has no response: %.200s", data)
	case r.UID != review.Request.UID:
		return fmt.Errorf("the webhook answered for review %q, not %q", r.UID, review.Request.UID)
	case !r.Allowed:
		msg := ""
		if r.Result != nil {
			msg = fmt.Sprintf(" (%d: %s)", r.Result.Code, r.Result.Message)
		}
		return fmt.Errorf("the webhook did not allow the dry-run delete of an object no Lock targets%s: deletes are failing closed", msg)
	}
	_, err = fmt.Fprintf(stdout, "lockguard's webhook at %s answered in %s: allowed a dry-run delete of an object no Lock targets\n",
		u.Redacted(), time.Since(start).Round(time.Millisecond))
	return err
}

// checkClientCertRequired returns nil when the webhook's answer to a
// review without a client certificate is lockguard's refusal of it.
func checkClientCertRequired(stdout io.Writer, u *url.URL, status int, data []byte, took time.Duration) error {
	if status != http.StatusForbidden || !bytes.HasPrefix(data, []byte(certs.ReviewCallerRefusal)) {
		return fmt.Errorf("the webhook answered HTTP %d to a review without a client certificate, not lockguard's 403 (is --review-client-ca set?): %.200s", status, data)
	}
	_, err := fmt.Fprintf(stdout, "lockguard's webhook at %s answered in %s: refused a review without a client certificate (--review-client-ca); the API server's own calls are not checked\n",
		u.Redacted(), took.Round(time.Millisecond))
	return err
}

// randomUID returns a random hex string for the review's UID.
func randomUID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func ptr[T any](v T) *T { return &v }
