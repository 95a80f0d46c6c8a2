//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// lockguardNamespace is the release namespace of the chart the local mode
// installs.
const lockguardNamespace = framework.ServiceAccountNamespace

// setupLocal starts a control plane with the garbage collector and
// namespace controllers, installs the Lock CRD and lockguard's chart as
// rendered for a local control plane (framework.LocalWebhook.InstallChart),
// and runs one replica of bin/lockguard as lockguard's ServiceAccount
// behind a framework.Front standing in for the Service.
func setupLocal() (*suite, func(), error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	binary := envOr(envBinary, filepath.Join(root, "bin", "lockguard"))
	if _, err := os.Stat(binary); err != nil {
		return nil, nil, fmt.Errorf("the lockguard binary is missing: run `make build` first: %w", err)
	}
	work, err := os.MkdirTemp("", "lockguard-e2e-")
	if err != nil {
		return nil, nil, err
	}
	var closers []func()
	cleanup := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		if keepArtifacts {
			fmt.Fprintln(os.Stderr, "e2e: logs of the control plane and of every lockguard process are kept in", work)
		} else {
			os.RemoveAll(work)
		}
	}
	logs, err := os.Create(filepath.Join(work, "control-plane.log"))
	if err != nil {
		return nil, cleanup, err
	}
	closers = append(closers, func() { logs.Close() })

	// The API server's audit log, where Test15AuditAnnotations reads the
	// annotations lockguard puts on each decision.
	policy := filepath.Join(work, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, cleanup, err
	}
	auditLog := filepath.Join(work, "audit.log")
	env, err := framework.Start(framework.Options{
		ControllerManager: true,
		CRDDirs:           framework.CRDDirs(root),
		Logs:              logs,
		APIServerFlags:    map[string]string{"audit-policy-file": policy, "audit-log-path": auditLog},
	})
	if err != nil {
		return nil, cleanup, err
	}
	closers = append(closers, func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping the control plane:", err)
		}
	})

	st, err := newSuite("local", env.Config)
	if err != nil {
		return nil, cleanup, err
	}
	st.namespace = lockguardNamespace
	st.auditLog = auditLog
	st.kubeconfig = filepath.Join(work, "admin.kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, st.kubeconfig); err != nil {
		return nil, cleanup, err
	}
	kube.Kubeconfig = st.kubeconfig

	// lockguard runs as its ServiceAccount: only what the chart grants.
	saConfig, err := env.ServiceAccountConfig()
	if err != nil {
		return nil, cleanup, err
	}
	saKubeconfig := filepath.Join(work, "lockguard.kubeconfig")
	if err := framework.WriteKubeconfig(saConfig, saKubeconfig); err != nil {
		return nil, cleanup, err
	}

	// The replicas share one serving certificate; the chart's webhook
	// configuration points at their front.
	lw, err := framework.NewLocalWebhook(work)
	if err != nil {
		return nil, cleanup, err
	}
	// PVCs, Secrets and StatefulSets are protected by opt-in
	// (docs/contract.md rule 21): the chart's protect.resources, and the
	// same --protect-resource.
	set, err := framework.NewReplicaSet(lw, framework.ReplicaOptions{Binary: binary, Kubeconfig: saKubeconfig, Dir: work,
		Args: []string{"--protect-resource=persistentvolumeclaims,secrets,statefulsets.apps"}})
	if err != nil {
		return nil, cleanup, err
	}
	set.Webhook.SetJSON = append(set.Webhook.SetJSON, framework.ProtectSet(optedIn))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	vwc, err := set.Webhook.InstallChart(ctx, st.c)
	if err != nil {
		return nil, cleanup, err
	}
	// The unlock and identity Leases' entries last: rendered without the
	// policy capability (framework.RenderChart), as for 1.29.
	want := []string{st.webhookName, "namespace", "crd", "update", "subresource",
		"cluster-lock", "cluster-label", "cluster-update", "cluster-create", "protect", "protect-locked", "protect-update",
		"create", "exception", "unlock", "cluster-unlock", "peer-leases"}
	for i := 1; i < len(want); i++ {
		want[i] += ".lockguard.core.navique.com"
	}
	var got []string
	for _, w := range vwc.Webhooks {
		got = append(got, w.Name)
	}
	if !slices.Equal(got, want) {
		return nil, cleanup, fmt.Errorf("the chart's webhook configuration has the entries %q, want %q: the object guard's, the namespace, CRD and update guards' (the update guard's two), the ClusterLock guard's four, the opted-in kinds' two, the Lock CREATE entry, the LockException CREATE entry, the unlock entries (Locks, ClusterLocks), then the identity Leases' entry", got, want)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(lw.CA) {
		return nil, cleanup, errors.New("cannot parse the webhook CA")
	}
	lg := &localLockguard{set: set, ca: pool, dir: work}
	st.lg = lg
	s = st
	closers = append(closers, func() {
		if err := set.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping lockguard:", err)
		}
	})
	if err := set.Scale(ctx, 1); err != nil {
		return st, cleanup, err
	}
	return st, cleanup, nil
}

// localLockguard is the suite's view of a framework.ReplicaSet.
type localLockguard struct {
	set *framework.ReplicaSet
	ca  *x509.CertPool
	dir string
}

// Describe says where the logs are.
func (l *localLockguard) Describe() string {
	return fmt.Sprintf("lockguard runs as %s; logs of the control plane and of every lockguard process are in %s", framework.ServiceAccountUser, l.dir)
}

// Scale runs n replicas, ready.
func (l *localLockguard) Scale(ctx context.Context, n int) error { return l.set.Scale(ctx, n) }

// Replicas returns the running replicas.
func (l *localLockguard) Replicas(context.Context) ([]replica, error) {
	var out []replica
	for _, r := range l.set.Replicas() {
		out = append(out, &localReplica{r: r, ca: l.ca})
	}
	return out, nil
}

// Check returns the requests RBAC denied to lockguard, from its logs.
func (l *localLockguard) Check() []string { return l.set.RBACDenials() }

// localReplica is one replica of the set.
type localReplica struct {
	r  *framework.Replica
	ca *x509.CertPool
}

// Name returns the replica's name.
func (p *localReplica) Name() string { return p.r.Name }

// IsLeader reports whether the replica leads (its metrics say so).
func (p *localReplica) IsLeader(ctx context.Context) (bool, error) { return p.r.IsLeader(ctx) }

// Metrics scrapes the replica's process.
func (p *localReplica) Metrics(ctx context.Context) (map[string]float64, error) {
	lg := p.r.Process()
	if lg == nil {
		return nil, fmt.Errorf("replica %s is down", p.r.Name)
	}
	return lg.Metrics(ctx)
}

// Kill deletes the replica with SIGKILL: no graceful shutdown, the Lease
// is not released.
func (p *localReplica) Kill(context.Context) error { return p.r.Delete() }

// Review posts an AdmissionReview to the replica's webhook server over
// TLS, verifying its serving certificate.
func (p *localReplica) Review(ctx context.Context, review *admissionv1.AdmissionReview) (*admissionv1.AdmissionReview, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.ca, MinVersion: tls.VersionTLS12}}}
	return postReview(ctx, hc, "https://"+p.r.Address()+webhook.Path, review)
}

// postReview sends review to url and decodes the answer.
func postReview(ctx context.Context, hc *http.Client, url string, review *admissionv1.AdmissionReview) (*admissionv1.AdmissionReview, error) {
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST %s: %s: %s", url, resp.Status, data)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("decoding the AdmissionReview from %s: %w", url, err)
	}
	return &out, nil
}
