// Command kubectl-unlock is the kubectl plugin `kubectl unlock`: it shows
// the Locks that protect a core.navique.com resource, deletes them once
// confirmed, and waits until lockguard allows the resource's deletion. Put
// it on PATH, next to kubectl-lock:
//
//	go install github.com/navique/lockguard/cmd/kubectl-unlock@latest
package main

import (
	"os"

	"github.com/navique/lockguard/cmd/kubectl-lock/lockctl"
)

// version is set at build time with -ldflags "-X main.version=...";
// --version prints it.
var version = "dev"

func main() {
	cmd := lockctl.NewUnlockCommand(lockctl.OSStreams())
	cmd.Version = version
	// No -v shorthand: kubectl users read -v as log verbosity.
	cmd.Flags().Bool("version", false, "Print the version and exit.")
	cmd.SetVersionTemplate("kubectl-unlock {{.Version}}\n")
	os.Exit(lockctl.Main(cmd))
}
