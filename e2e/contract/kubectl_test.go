package contract_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/cmd/kubectl-lock/lockctl"
)

// result is what a command printed and returned.
type result struct {
	stdout, stderr string
	err            error
}

// kubectlLock runs `kubectl lock args...` in-process against the test API
// server, with stdin.
func kubectlLock(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return run1(t, lockctl.NewLockCommand, stdin, args)
}

// kubectlUnlock runs `kubectl unlock args...` in-process.
func kubectlUnlock(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return run1(t, lockctl.NewUnlockCommand, stdin, args)
}

func run1(t *testing.T, newCmd func(lockctl.Streams) *cobra.Command, stdin string, args []string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newCmd(lockctl.Streams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", kube.Kubeconfig}, args...))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	t.Logf("%s %s: err %v\nstdout:\n%s\nstderr:\n%s", cmd.DisplayName(), strings.Join(args, " "), err, out.String(), errOut.String())
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}

// dryRunDelete sends a server-side dry-run DELETE of an object: the API
// server runs admission (lockguard) and deletes nothing.
func dryRunDelete(t *testing.T, gvk schema.GroupVersionKind, ns, name string) error {
	t.Helper()
	return kube.DeleteObject(t.Context(), gvk, ns, name, client.DryRunAll)
}

// getLock reads a Lock.
func getLock(t *testing.T, ns, name string) *lockv1alpha1.Lock {
	t.Helper()
	var l lockv1alpha1.Lock
	if err := kube.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &l); err != nil {
		t.Fatalf("reading Lock %s/%s: %v", ns, name, err)
	}
	return &l
}

// lockNames lists the names of the Locks of a namespace.
func lockNames(t *testing.T, ns string) []string {
	t.Helper()
	var list lockv1alpha1.LockList
	if err := kube.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, l := range list.Items {
		names = append(names, l.Name)
	}
	return names
}

// errText is an error's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
