// Command demo runs lockguard for real: it starts a local control plane
// (etcd, kube-apiserver, kube-controller-manager), installs lockguard's Helm
// chart as rendered for a local control plane (the Lock CRD, RBAC and
// webhook configuration, the webhook at a local URL), runs the
// lockguard binary as its ServiceAccount, applies the contract's example and
// shows `kubectl delete stack forge -n forge` being denied. It then prints a
// KUBECONFIG to try more and keeps running until Ctrl-C. `make demo` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/e2e/framework"
)

const example = `apiVersion: v1
kind: Namespace
metadata:
  name: forge
---
apiVersion: core.navique.com/v1alpha1
kind: Stack
metadata:
  name: forge
  namespace: forge
spec:
  environment: production
---
apiVersion: core.navique.com/v1alpha1
kind: Lock
metadata:
  name: protect-forge-stack
  namespace: forge
spec:
  targetRef:
    apiVersion: core.navique.com/v1alpha1   # optional, this is the default
    kind: Stack
    name: forge
  reason: "Production environment - remove this Lock deliberately before deleting."
`

func main() {
	binary := flag.String("lockguard", "bin/lockguard", "Path of the lockguard binary.")
	verbose := flag.Bool("v", false, "Show the control plane's and lockguard's logs.")
	once := flag.Bool("once", false, "Exit after showing the denial instead of waiting for Ctrl-C.")
	flag.Parse()
	if err := run(*binary, *verbose, *once); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func run(binary string, verbose, once bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	if _, err := os.Stat(binary); err != nil {
		return fmt.Errorf("lockguard binary: %w (run `make build`)", err)
	}
	var logs *os.File
	if verbose {
		logs = os.Stderr
	}

	step("Starting etcd, kube-apiserver v%s and kube-controller-manager; the Lock CRD (the chart's crds/) and sample Stack/PostgresCluster CRDs", framework.Version())
	o := framework.Options{
		ControllerManager: true,
		CRDDirs:           framework.CRDDirs(root),
	}
	if logs != nil {
		o.Logs = logs
	}
	env, err := framework.Start(o)
	if err != nil {
		return err
	}
	defer func() {
		step("Stopping the control plane")
		_ = env.Stop()
	}()
	scheme, err := manager.NewScheme()
	if err != nil {
		return err
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	adminKubeconfig := filepath.Join(env.Dir, "admin.kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, adminKubeconfig); err != nil {
		return err
	}

	// lockguard's webhook address and serving certificate, then the
	// chart's RBAC and webhook configuration pointing there.
	wh, err := framework.NewLocalWebhook(env.Dir)
	if err != nil {
		return err
	}
	step("Installing the chart (deploy/chart/lockguard): its RBAC, FlowSchema and webhook configuration, the webhook at https://%s", wh.Address())
	if _, err := wh.InstallChart(ctx, c); err != nil {
		return err
	}

	step("Starting lockguard as system:serviceaccount:%s:%s", framework.ServiceAccountNamespace, framework.ServiceAccountName)
	saConfig, err := env.ServiceAccountConfig()
	if err != nil {
		return err
	}
	saKubeconfig := filepath.Join(env.Dir, "lockguard.kubeconfig")
	if err := framework.WriteKubeconfig(saConfig, saKubeconfig); err != nil {
		return err
	}
	lo := framework.LockguardOptions{Binary: binary, Kubeconfig: saKubeconfig, Webhook: wh, Args: []string{"--zap-log-level=info"}}
	if logs != nil {
		lo.Logs = logs
	}
	lg, err := framework.StartLockguard(lo)
	if err != nil {
		return err
	}
	defer func() {
		step("Stopping lockguard")
		if err := lg.Stop(30 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	readyCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := lg.WaitReady(readyCtx); err != nil {
		return err
	}
	step("lockguard is ready: webhook on https://%s/validate-delete", lg.Webhook.Address())

	step("Applying the example: namespace forge, Stack forge, Lock protect-forge-stack")
	exampleFile := filepath.Join(env.Dir, "example.yaml")
	if err := os.WriteFile(exampleFile, []byte(example), 0o600); err != nil {
		return err
	}
	if err := framework.ApplyFiles(ctx, c, exampleFile); err != nil {
		return err
	}
	if err := waitActive(ctx, c); err != nil {
		return err
	}
	path := filepath.Join(root, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
	kubectl(path, adminKubeconfig, "get", "locks", "-n", "forge", "-o", "wide")
	kubectl(path, adminKubeconfig, "get", "stack", "forge", "-n", "forge", "-o", "jsonpath={.metadata.annotations}{\"\\n\"}")

	step("kubectl delete stack forge -n forge")
	kubectl(path, adminKubeconfig, "delete", "stack", "forge", "-n", "forge")

	step("The kubectl plugin (bin/kubectl-lock): what is locked, and why")
	kubectl(path, adminKubeconfig, "lock", "list", "-n", "forge")

	if once {
		return nil
	}
	fmt.Printf(`
lockguard is running. Try it from another shell:

  export KUBECONFIG=%s
  export PATH=%s   # the pinned kubectl and the plugins
  kubectl get locks -A
  kubectl delete stack forge -n forge          # denied
  kubectl unlock stack/forge -n forge          # shows the Lock, asks, deletes it
  kubectl lock stack/forge -n forge --reason "Locked again"   # waits until active
  kubectl lock list -A
  kubectl unlock stack/forge -n forge --yes
  kubectl delete stack forge -n forge          # now deleted

Press Ctrl-C to stop and clean up.
`, adminKubeconfig, filepath.Join(root, "bin")+":"+filepath.Join(root, "bin", "path")+":$PATH")
	<-ctx.Done()
	fmt.Println()
	return nil
}

// waitActive waits until the example Lock is active.
func waitActive(ctx context.Context, c client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		var l lockv1alpha1.Lock
		err := c.Get(ctx, client.ObjectKey{Namespace: "forge", Name: "protect-forge-stack"}, &l)
		if err == nil && l.Status.Active {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the Lock did not become active: %v (status %+v)", ctx.Err(), l.Status)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kubectl runs kubectl (and its plugins) from path, showing the command
// and its output.
func kubectl(path, kubeconfig string, args ...string) {
	fmt.Printf("$ kubectl %s\n", strings.Join(args, " "))
	cmd := exec.Command("kubectl", args...)
	cmd.Env = append(os.Environ(), "PATH="+path, "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	if err := cmd.Run(); err != nil {
		fmt.Printf("(exit status %d)\n", cmd.ProcessState.ExitCode())
	}
}
