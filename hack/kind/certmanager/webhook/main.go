// Command webhook is cert-manager's webhook (validation, defaulting and
// conversion of cert-manager's resources, with its dynamic serving CA), with
// the configuration flags of cert-manager's webhook binary.
package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/cmd/lockguard-kind/internal/cli"
	cmwebhook "github.com/cert-manager/cert-manager/internal/webhook"
	"github.com/cert-manager/cert-manager/pkg/webhook/options"
)

func main() {
	cfg, err := options.NewWebhookConfiguration()
	if err != nil {
		panic(err)
	}
	flags := options.NewWebhookFlags()
	fs := pflag.NewFlagSet("webhook", pflag.ExitOnError)
	flags.AddFlags(fs)
	options.AddConfigFlags(fs, cfg)
	cli.Main("cert-manager-webhook", fs, func(ctx context.Context) error {
		if flags.Config != "" {
			return errors.New("--config: configuration files are not supported by this build; use flags")
		}
		srv, err := cmwebhook.NewCertManagerWebhookServer(klog.Background(), *cfg)
		if err != nil {
			return err
		}
		return srv.Run(ctx)
	})
}
