// Command kubectl-unlock is the kubectl plugin `kubectl unlock`: it shows
// the Locks that protect a core.navique.com resource, deletes them once
// confirmed, and waits until lockguard allows the resource's deletion. Put
// it on PATH, next to kubectl-lock:
//
//	go install github.com/navique/lockguard/cmd/kubectl-unlock@latest
package main

import (
	"os"

	"github.com/navique/lockguard/internal/lockctl"
)

func main() {
	os.Exit(lockctl.Main(lockctl.NewUnlockCommand(lockctl.OSStreams())))
}
