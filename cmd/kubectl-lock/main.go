// Command kubectl-lock is the kubectl plugin `kubectl lock`: it protects a
// core.navique.com resource against deletion with a Lock and waits until
// lockguard enforces it (`kubectl lock stack/forge --reason ...`), lists
// what is locked (`kubectl lock list`) and says which Locks would block a
// delete (`kubectl lock why`). Put it on PATH, next to
// kubectl-unlock:
//
//	go install github.com/navique/lockguard/cmd/kubectl-lock@latest
package main

import (
	"os"

	"github.com/navique/lockguard/internal/lockctl"
)

func main() {
	os.Exit(lockctl.Main(lockctl.NewLockCommand(lockctl.OSStreams())))
}
