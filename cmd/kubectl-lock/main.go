// Command kubectl-lock is the kubectl plugin `kubectl lock`: it protects a
// core.navique.com resource against deletion with a Lock and waits until
// lockguard enforces it (`kubectl lock stack/forge --reason ...`), lists
// what is locked (`kubectl lock list`), shows and changes one Lock
// (`kubectl lock show`, `kubectl lock update`), deletes one by name
// (`kubectl lock unlock`), manages break-glass exceptions (`kubectl lock
// exception`) and says which Locks would block a delete (`kubectl lock
// why`). Put it on PATH, next to
// kubectl-unlock:
//
//	go install github.com/navique/lockguard/cmd/kubectl-lock@latest
package main

import (
	"os"

	"github.com/navique/lockguard/cmd/kubectl-lock/lockctl"
)

// version is set at build time with -ldflags "-X main.version=...";
// --version prints it.
var version = "dev"

func main() {
	cmd := lockctl.NewLockCommand(lockctl.OSStreams())
	cmd.Version = version
	// No -v shorthand: kubectl users read -v as log verbosity.
	cmd.Flags().Bool("version", false, "Print the version and exit.")
	cmd.SetVersionTemplate("kubectl-lock {{.Version}}\n")
	os.Exit(lockctl.Main(cmd))
}
