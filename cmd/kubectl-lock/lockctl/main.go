package lockctl

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Main runs a plugin's command with the process's arguments until it ends
// or an interrupt, prints an error the way kubectl does, and returns the
// exit code.
func Main(cmd *cobra.Command) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), ErrorMessage(err))
		return 1
	}
	return 0
}

// ErrorMessage formats an error as kubectl prints it: "Error from server
// (Reason): ..." for an API error returned as is, "error: ..." otherwise.
func ErrorMessage(err error) string {
	if se, ok := err.(*apierrors.StatusError); ok && se.ErrStatus.Reason != "" {
		return fmt.Sprintf("Error from server (%s): %s", se.ErrStatus.Reason, se.Error())
	}
	return "error: " + err.Error()
}

// clock is the plugin's clock: the instant at which kubectl lock why and
// list tell whether a Lock is live (Lock.Live) or expired, and kubectl
// lock --for counts from. Tests set it to decide at a given instant.
var clock = time.Now
