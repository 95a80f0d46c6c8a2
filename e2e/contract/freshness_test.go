package contract_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestReadyMeansFresh starts the lockguard binary, as its ServiceAccount,
// while Locks exist, polls /readyz without pause, and the first moment it
// is ready sends the delete of a locked Stack through the API server: it
// must be denied, as must dry-run deletes of other locked Stacks sent
// right after. Readiness must never be true before the Lock cache is
// complete. Three rounds, with more Locks each time; each round ends with
// SIGKILL, as a crash would.
func TestReadyMeansFresh(t *testing.T) {
	inProcess(t)
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	bin, err := framework.BuildLockguard(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := kube.Client
	wh, err := framework.NewLocalWebhook(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The chart's RBAC for lockguard's ServiceAccount, and its webhook
	// configuration pointing at wh, for a namespace of its own: the
	// suite's lockguard, whose configuration leaves that namespace out,
	// must not answer for the test's.
	objs, err := wh.RenderChart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "ValidatingWebhookConfiguration" })
	if err := framework.Apply(ctx, c, objs...); err != nil {
		t.Fatal(err)
	}
	fresh, vwc := webhookForNamespace(t, wh, "fresh", "lockguard-fresh")
	// Each round creates its Locks while the test's lockguard is down, as
	// Locks created through other replicas would be; a lone lockguard that
	// is down refuses Lock creates (the create entry, failurePolicy Fail),
	// so the test's configuration leaves that entry out.
	installed := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vwc), installed); err != nil {
		t.Fatal(err)
	}
	installed.Webhooks = slices.DeleteFunc(installed.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
		return w.ClientConfig.URL != nil && strings.HasSuffix(*w.ClientConfig.URL, webhook.CreatePath)
	})
	if err := c.Update(ctx, installed); err != nil {
		t.Fatal(err)
	}
	saCfg, err := suite.env.ServiceAccountConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "lockguard.kubeconfig")
	if err := framework.WriteKubeconfig(saCfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	webhookName := vwc.Webhooks[0].Name

	var locked []string // targets, in creation order
	for round, add := range []int{200, 400, 800} {
		start := len(locked)
		names := make([]string, add)
		for i := range names {
			names[i] = fmt.Sprintf("s%04d", start+i)
		}
		parallel(t, names, func(name string) error {
			if err := c.Create(ctx, framework.Object(framework.StackGVK, fresh, name)); err != nil {
				return err
			}
			return c.Create(ctx, &lockv1alpha1.Lock{
				ObjectMeta: metav1.ObjectMeta{Namespace: fresh, Name: "lock-" + name},
				Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: name}},
			})
		})
		locked = append(locked, names...)
		if err := c.Create(ctx, framework.Object(framework.StackGVK, fresh, fmt.Sprintf("free-%d", round))); err != nil {
			t.Fatal(err)
		}

		logs, err := os.Create(filepath.Join(dir, fmt.Sprintf("lockguard-%d.log", round)))
		if err != nil {
			t.Fatal(err)
		}
		lg, err := framework.StartLockguard(framework.LockguardOptions{Binary: bin, Kubeconfig: kubeconfig, Webhook: wh, Dir: dir, Logs: logs})
		if err != nil {
			t.Fatal(err)
		}
		polls, notReady := waitFirstReady(t, lg)

		// The first ready moment: the newest Lock's target first, then a
		// dry run of every Lock's target.
		newest := locked[len(locked)-1]
		if err := c.Delete(ctx, framework.Object(framework.StackGVK, fresh, newest)); !isDenial(err, webhookName, "lock-"+newest) {
			t.Fatalf("delete of a Stack locked by lock-%s at lockguard's first ready moment: got %v, want a denial", newest, err)
		}
		parallel(t, locked, func(name string) error {
			err := c.Delete(ctx, framework.Object(framework.StackGVK, fresh, name), client.DryRunAll)
			if !isDenial(err, webhookName, "lock-"+name) {
				return fmt.Errorf("dry-run delete of locked Stack %s right after ready: %v", name, err)
			}
			return nil
		})
		if err := c.Delete(ctx, framework.Object(framework.StackGVK, fresh, fmt.Sprintf("free-%d", round))); err != nil {
			t.Errorf("round %d: delete of an unlocked Stack: %v", round, err)
		}
		t.Logf("round %d: %d Locks; ready after %d polls of /readyz (%d not ready); every locked delete denied", round, len(locked), polls, notReady)
		lg.Kill()
		logs.Close()
		if t.Failed() {
			t.Logf("lockguard's log: %s", logs.Name())
			return
		}
	}
}

// waitFirstReady polls lg's /readyz back to back until it answers 200, and
// returns how many polls it took and how many said not ready.
func waitFirstReady(t *testing.T, lg *framework.Lockguard) (polls, notReady int) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		polls++
		resp, err := hc.Get("http://" + lg.ProbeAddr + "/readyz")
		if err != nil {
			time.Sleep(time.Millisecond) // Not listening yet.
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return polls, notReady
		}
		notReady++
	}
	t.Fatalf("lockguard not ready after 2 minutes")
	return
}

// parallel runs f on every name, 8 at a time, and fails the test on the
// first error.
func parallel(t *testing.T, names []string, f func(string) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	work := make(chan string)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range work {
				if err := f(name); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d failures, first: %v", len(errs), errs[0])
	}
}

// isDenial reports whether err is lockguard's denial naming exactly lock.
func isDenial(err error, webhookName, lock string) bool {
	want := fmt.Sprintf("admission webhook %q denied the request: ", webhookName) +
		framework.DenialMessage(&lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Name: lock}})
	return apierrors.IsForbidden(err) && strings.HasSuffix(err.Error(), want)
}
