// Package cli holds what the three commands share: logging flags as
// cert-manager's binaries declare them, and a context cancelled on SIGTERM.
package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"

	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

// Main parses fs (after adding the logging flags to it), applies the
// logging configuration and runs run with a context cancelled on SIGINT or
// SIGTERM; it exits with status 1 if run fails.
func Main(name string, fs *pflag.FlagSet, run func(ctx context.Context) error) {
	logf.InitLogs()
	opts := logsapi.NewLoggingConfiguration()
	// The logging flags the command has not declared itself (the webhook's
	// configuration flags include some).
	logFlags := pflag.NewFlagSet("logging", pflag.ContinueOnError)
	logf.AddFlags(opts, logFlags)
	fs.AddFlagSet(logFlags)
	if err := fs.Parse(os.Args[1:]); err != nil {
		fail(name, err)
	}
	if err := logf.ValidateAndApply(opts); err != nil {
		fail(name, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fail(name, err)
	}
	logf.FlushLogs()
}

func fail(name string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	logf.FlushLogs()
	os.Exit(1)
}
