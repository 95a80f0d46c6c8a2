package lockctl

import (
	"fmt"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Values of --dry-run, as kubectl's.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

// addDryRunFlag registers kubectl's --dry-run on cmd, into p, for a
// command that writes: server sends its writes with dryRun=All, client
// sends none of them.
func addDryRunFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "dry-run", dryRunNone, `"server": each write is sent as a server-side dry run: RBAC, admission (lockguard's unlock and break-glass checks) and validation answer as for the real one, and nothing is changed; "client": nothing is sent but reads.`)
}

// checkDryRun returns an error when v is not a value of --dry-run ("" is
// none).
func checkDryRun(v string) error {
	switch v {
	case "", dryRunNone, dryRunClient, dryRunServer:
		return nil
	}
	return fmt.Errorf(`invalid --dry-run %q: it must be "none", "server" or "client"`, v)
}

// dryRunning reports whether --dry-run v sends no real write.
func dryRunning(v string) bool { return v == dryRunClient || v == dryRunServer }

// dryRunSuffix is what kubectl appends to the line of a write under
// --dry-run v: " (dry run)", " (server dry run)", or nothing.
func dryRunSuffix(v string) string {
	switch v {
	case dryRunClient:
		return " (dry run)"
	case dryRunServer:
		return " (server dry run)"
	}
	return ""
}

// dryRunAll is the DryRun of a write's options under --dry-run v: All for
// a server dry run, none otherwise.
func dryRunAll(v string) []string {
	if v == dryRunServer {
		return []string{metav1.DryRunAll}
	}
	return nil
}
