package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildLockguard returns the lockguard binary to test: $LOCKGUARD_BINARY
// when set (make sets it to bin/lockguard), otherwise one built from this
// checkout into dir, so that tests never run a stale binary.
func BuildLockguard(dir string) (string, error) {
	if p := os.Getenv("LOCKGUARD_BINARY"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("LOCKGUARD_BINARY: %w", err)
		}
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "lockguard")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/lockguard")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building lockguard: %w\n%s", err, msg)
	}
	return out, nil
}
