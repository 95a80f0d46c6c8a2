package bench

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/certs"
	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/manager"
	"github.com/navique/lockguard/webhook"
)

// Issue 13 compares ways of confirming, against the API server, a DELETE
// that lockguard's Lock cache would allow. The candidates below are served
// by a webhook server of the bench's own (ServeCandidates, a child
// process), built from lockguard's webhook.Handler on its Lock index:
// only the confirmation differs from one candidate to the next, so that
// they can be measured side by side with the lockguard binary without
// changing the product. The API read of each candidate is what a product
// implementation would send; the designs around them (a label or a name
// the API server can rely on) are simulated by the bench creating its
// Locks that way.

// Candidate names: the path /c/<name> of the candidate server, and a mode
// of the decisions benchmark ("c-<name>").
const (
	// CandCacheOnly decides from the cache alone (what
	// --cache-only-decisions does), in the candidate server: the control
	// for the server's own overhead.
	CandCacheOnly = "cache-only"
	// CandListCoalesced is lockguard's default today: a consistent list of
	// the namespace's Locks, shared per namespace (webhook/confirm.go).
	CandListCoalesced = "list-coalesced"
	// CandList is the same list, one per confirmation.
	CandList = "list"
	// CandListLabel lists the namespace's Locks with a label selector on
	// TargetLabel, which a product would have to guarantee on every Lock
	// from its creation.
	CandListLabel = "list-label"
	// CandListFields lists with a field selector on spec.targetRef.kind and
	// spec.targetRef.name: CRD selectableFields (beta in 1.31, GA in 1.32).
	CandListFields = "list-fields"
	// CandListRV0 lists the namespace's Locks with resourceVersion "0":
	// whatever the API server's watch cache holds. Not a consistent read:
	// measured as a reference, and in the window test.
	CandListRV0 = "list-rv0"
	// CandGet gets the Lock named DerivedLockName(target): a quorum read
	// from etcd on every version. The design it stands for (a Lock's name
	// derivable from its target) is simulated by the bench naming its
	// Locks that way.
	CandGet = "get"
	// CandIndex is a prototype of a per-target record written when a Lock
	// is admitted: the candidate server also validates Lock CREATEs
	// (IndexPath) and, before allowing one, records the Lock's name in a
	// ConfigMap named IndexName(target) in its namespace. A delete the
	// cache would allow is confirmed by a GET of that ConfigMap (a quorum
	// read from etcd), and of each Lock it names that the cache lacks.
	// Locks keep free names and stack.
	CandIndex = "index"
)

// Candidates are the candidates in the order they are reported.
var Candidates = []string{CandCacheOnly, CandListCoalesced, CandList, CandListLabel, CandListFields, CandListRV0, CandGet, CandIndex}

// IndexPath is where the candidate server validates Lock CREATEs for
// CandIndex.
const IndexPath = "/lock-create/index"

// IndexName is the name of CandIndex's record of the Locks of a target
// (a product would hash long names).
func IndexName(kind, name string) string { return "lockindex." + strings.ToLower(kind) + "." + name }

// StrictCandidate reports whether a candidate's answer reflects every Lock
// whose create returned before the delete reached the webhook (argued in
// docs; tested by the window benchmark).
func StrictCandidate(name string) bool {
	switch name {
	case CandCacheOnly, CandListRV0:
		return false
	}
	return true
}

// DerivedNames reports whether a candidate needs Locks named
// DerivedLockName(target); the others take any name.
func DerivedNames(name string) bool { return name == CandGet }

// TargetLabel is the label the bench puts on every Lock it creates, with
// TargetLabelValue of its target: what CandListLabel selects on.
const TargetLabel = "bench.lockguard.navique.com/target"

// TargetLabelValue is the TargetLabel value of a target: "<Kind>.<name>".
// (A product would hash long names: label values hold 63 characters.)
func TargetLabelValue(kind, name string) string { return kind + "." + name }

// DerivedLockName is the name CandGet reads for a target:
// "<kind>.<name>", lowercase kind. (A product would hash long names: the
// result must be a DNS subdomain of at most 253 characters.)
func DerivedLockName(kind, name string) string { return strings.ToLower(kind) + "." + name }

// BenchLock returns a Lock ns/name on Stack target, labelled for
// CandListLabel.
func BenchLock(ns, name, target string) *lockv1alpha1.Lock {
	l := LockOn(ns, name, target)
	l.Labels = map[string]string{TargetLabel: TargetLabelValue("Stack", target)}
	return l
}

// SelectableFields are the CRD selectableFields CandListFields needs.
var SelectableFields = []string{".spec.targetRef.kind", ".spec.targetRef.name"}

// matching returns the live Locks of locks that target key.
func matching(locks []lockv1alpha1.Lock, key lockv1alpha1.TargetKey) []lockv1alpha1.Lock {
	var out []lockv1alpha1.Lock
	for i := range locks {
		if target, live := locks[i].LiveTarget(); live && target == key {
			out = append(out, locks[i])
		}
	}
	return out
}

// confirmTimeout bounds a candidate's read, as webhook/confirm.go bounds
// lockguard's: the webhook answers (fail closed) before the API server's
// call to it times out.
const confirmTimeout = 3 * time.Second

// readFunc is a candidate's confirmation: the live Locks of key, read from
// the API server.
type readFunc func(ctx context.Context, key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error)

// confirmWith returns a webhook.LockIndex that answers from cached when it
// has a Lock, and otherwise from read: lockguard's lookup with the
// candidate's confirmation. Served by webhook.NewHandler with no
// LockLister, so that the handler's decision, denial message and fail-closed
// answer are lockguard's, and only the read differs.
//
// The handler's own seam for the confirmation, webhook.LockLister, is
// handed a namespace only (and its reads are shared per namespace), so a
// read that selects by target (a label, a field, a name) cannot be
// expressed through it; the index seam sees the target.
func confirmWith(cached webhook.LockIndex, read readFunc) webhook.LockIndex {
	return webhook.LockIndexFunc(func(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
		locks, err := cached.LiveLocks(key)
		if err != nil || len(locks) > 0 {
			return locks, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
		defer cancel()
		return read(ctx, key)
	})
}

// listRead lists key's namespace's Locks with opts and keeps the live ones
// targeting it.
func listRead(live client.Reader, opts func(key lockv1alpha1.TargetKey) []client.ListOption) readFunc {
	return func(ctx context.Context, key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
		var all lockv1alpha1.LockList
		if err := live.List(ctx, &all, append([]client.ListOption{client.InNamespace(key.Namespace)}, opts(key)...)...); err != nil {
			return nil, err
		}
		return matching(all.Items, key), nil
	}
}

// CandidateHandler returns the webhook.Handler of candidate name: lockguard's
// handler on index, with the candidate's confirmation. cache-only and
// list-coalesced are lockguard's two modes exactly (webhook.NewHandler with
// no reader, and with live); the others confirm through confirmWith.
func CandidateHandler(name string, index webhook.LockIndex, live client.Reader) (*webhook.Handler, error) {
	none := func(lockv1alpha1.TargetKey) []client.ListOption { return nil }
	var read readFunc
	switch name {
	case CandCacheOnly:
		return webhook.NewHandler(index, nil), nil
	case CandListCoalesced:
		return webhook.NewHandler(index, live), nil
	case CandList:
		read = listRead(live, none)
	case CandListLabel:
		read = listRead(live, func(key lockv1alpha1.TargetKey) []client.ListOption {
			return []client.ListOption{client.MatchingLabels{TargetLabel: TargetLabelValue(key.Kind, key.Name)}}
		})
	case CandListFields:
		read = listRead(live, func(key lockv1alpha1.TargetKey) []client.ListOption {
			return []client.ListOption{client.MatchingFields{"spec.targetRef.kind": key.Kind, "spec.targetRef.name": key.Name}}
		})
	case CandListRV0:
		read = listRead(live, func(lockv1alpha1.TargetKey) []client.ListOption {
			return []client.ListOption{&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}}
		})
	case CandGet:
		read = func(ctx context.Context, key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
			var l lockv1alpha1.Lock
			err := live.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: DerivedLockName(key.Kind, key.Name)}, &l)
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return matching([]lockv1alpha1.Lock{l}, key), nil
		}
	case CandIndex:
		read = func(ctx context.Context, key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
			var index corev1.ConfigMap
			err := live.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: IndexName(key.Kind, key.Name)}, &index)
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			// The record names every Lock admitted on the target; those
			// deleted since are absent or being deleted.
			var locks []lockv1alpha1.Lock
			for name := range index.Data {
				var l lockv1alpha1.Lock
				err := live.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: name}, &l)
				if apierrors.IsNotFound(err) {
					continue
				}
				if err != nil {
					return nil, err
				}
				locks = append(locks, matching([]lockv1alpha1.Lock{l}, key)...)
			}
			return locks, nil
		}
	default:
		return nil, fmt.Errorf("unknown candidate %q", name)
	}
	return webhook.NewHandler(confirmWith(index, read), nil), nil
}

// indexAdmission validates Lock CREATEs for CandIndex: before allowing
// one, it records the Lock's name in its target's index ConfigMap, so that
// the record is committed before the Lock is. Dry-run creates write
// nothing (the webhook's sideEffects: NoneOnDryRun).
func indexAdmission(c client.Client) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad AdmissionReview", http.StatusBadRequest)
			return
		}
		req := review.Request
		resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
		var l lockv1alpha1.Lock
		err := json.Unmarshal(req.Object.Raw, &l)
		if err == nil && (req.DryRun == nil || !*req.DryRun) {
			if key, terr := l.Target(); terr == nil {
				err = recordLock(r.Context(), c, req.Namespace, IndexName(key.Kind, key.Name), req.Name)
			}
		}
		if err != nil {
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusInternalServerError, Message: "lockguard could not record the Lock: " + err.Error()}
		}
		review.Response, review.Request = resp, nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	}
}

// recordLock adds lock to index ConfigMap ns/name, creating it if needed.
func recordLock(ctx context.Context, c client.Client, ns, name, lock string) error {
	now := time.Now().UTC().Format(time.RFC3339)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{lock: now}}
	err := c.Create(ctx, cm)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	patch, err := json.Marshal(map[string]any{"data": map[string]string{lock: now}})
	if err != nil {
		return err
	}
	return c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.RawPatch(types.MergePatchType, patch))
}

// ServeCandidates serves every candidate in names at /c/<name> over TLS on
// addr (certificate in certDir), reading Locks as the user of kubeconfig
// with lockguard's client settings; /readyz answers 200 once the Lock
// cache has synced. It returns when the server fails.
func ServeCandidates(addr, certDir, kubeconfig string, names []string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 500, 1000 // lockguard's defaults (--kube-api-qps, --kube-api-burst)
	scheme, err := manager.NewScheme()
	if err != nil {
		return err
	}
	ctx := context.Background()
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultTransform: controller.CacheTransform()})
	if err != nil {
		return err
	}
	index, err := controller.NewLockIndex(ctx, c)
	if err != nil {
		return err
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "candidate server: cache:", err)
			os.Exit(1)
		}
	}()
	live, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	for _, name := range names {
		h, err := CandidateHandler(name, index, live)
		if err != nil {
			return err
		}
		mux.Handle("/c/"+name, h)
	}
	mux.Handle(IndexPath, indexAdmission(live))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !index.HasSynced() {
			http.Error(w, "Lock cache not synced", http.StatusServiceUnavailable)
		}
	})
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return err
	}
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	certs.ServerTLS(false)(tlsCfg)
	srv := &http.Server{Addr: addr, Handler: mux, TLSConfig: tlsCfg, ReadHeaderTimeout: 10 * time.Second}
	return srv.ListenAndServeTLS("", "")
}

// CandidateServer is ServeCandidates running in a child process.
type CandidateServer struct {
	Webhook *framework.LocalWebhook
	cmd     *exec.Cmd
	exited  chan struct{}
}

// StartCandidates runs `<self> -candidate-webhook addr -candidate-cert-dir
// dir -candidate-kubeconfig lockguard.kubeconfig -candidates names` (the
// hack/bench binary) as lockguard's ServiceAccount, and waits until its
// Lock cache has synced.
func (c *Cluster) StartCandidates(ctx context.Context, names []string) (*CandidateServer, error) {
	wh, err := framework.NewLocalWebhook(c.Env.Dir)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	s := &CandidateServer{Webhook: wh, exited: make(chan struct{})}
	s.cmd = exec.Command(self, "-candidate-webhook", wh.Address(), "-candidate-cert-dir", wh.CertDir,
		"-candidate-kubeconfig", c.LockguardKubeconfig, "-candidates", strings.Join(names, ","))
	s.cmd.Stdout, s.cmd.Stderr = os.Stderr, os.Stderr
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback readiness probe
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := hc.Get("https://" + wh.Address() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			return nil, errors.New("candidate server exited before it was ready")
		case <-ctx.Done():
			s.Stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, errors.New("candidate server not ready after a minute")
		}
	}
}

// Pid is the child process's id.
func (s *CandidateServer) Pid() int { return s.cmd.Process.Pid }

// Stop kills the child process.
func (s *CandidateServer) Stop() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// URL is the webhook URL of candidate name.
func (s *CandidateServer) URL(name string) string {
	return "https://" + net.JoinHostPort(s.Webhook.Host, fmt.Sprint(s.Webhook.Port)) + "/c/" + name
}

// IndexURL is the URL of CandIndex's Lock CREATE webhook.
func (s *CandidateServer) IndexURL() string {
	return "https://" + net.JoinHostPort(s.Webhook.Host, fmt.Sprint(s.Webhook.Port)) + IndexPath
}
