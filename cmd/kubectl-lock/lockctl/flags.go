package lockctl

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// locksResource is the Lock API's resource.
var locksResource = lockv1alpha1.GroupVersion.WithResource("locks")

// lockGroupResource is how kubectl names Locks in its messages.
var lockGroupResource = schema.GroupResource{Group: lockv1alpha1.Group, Resource: "lock"}

// Streams are where a command reads and writes.
type Streams struct {
	// In is standard input (unlock's confirmation).
	In io.Reader
	// Out is standard output.
	Out io.Writer
	// ErrOut is standard error.
	ErrOut io.Writer
}

// OSStreams returns the process's standard streams.
func OSStreams() Streams { return Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr} }

// Flags are kubectl's connection flags (--kubeconfig, --context, -n and the
// other client-go overrides, under kubectl's names), shared by every verb.
type Flags struct {
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
}

// AddFlags registers the flags on fs.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.kubeconfig, clientcmd.RecommendedConfigPathFlag, "", "Path to the kubeconfig file to use for CLI requests.")
	clientcmd.BindOverrideFlags(&f.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
}

// clients are what a verb talks to the API server with.
type clients struct {
	// namespace is -n, or the kubeconfig context's namespace.
	namespace string
	dynamic   dynamic.Interface
	mapper    meta.RESTMapperWithContext
	// discovery lists what the API server serves (why's descendants).
	discovery discovery.CachedDiscoveryInterfaceWithContext
	// config is the connection the clients were built from.
	config *rest.Config
}

// clients builds the clients from the flags, the way kubectl does:
// KUBECONFIG or ~/.kube/config unless --kubeconfig, then the overrides.
func (f *Flags) clients() (*clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	config := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &f.overrides)
	ns, _, err := config.Namespace()
	if err != nil {
		return nil, err
	}
	cfg, err := config.ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "kubectl-lock"
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cached := memory.NewMemCacheClientWithContext(dc)
	mapper := restmapper.NewShortcutExpanderWithContext(restmapper.NewDeferredDiscoveryRESTMapperWithContext(cached), cached, func(string) {})
	return &clients{namespace: ns, dynamic: dyn, mapper: mapper, discovery: cached, config: cfg}, nil
}

// target builds the clients and resolves a TYPE/NAME argument with them.
func (f *Flags) target(ctx context.Context, arg string) (*clients, target, error) {
	c, err := f.clients()
	if err != nil {
		return nil, target{}, err
	}
	t, err := resolveTarget(ctx, c.mapper, arg)
	return c, t, err
}

// outputFormat checks -o: empty (text), json or yaml.
func outputFormat(o string) error {
	switch o {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: json,yaml", o)
}

// pluginCommand makes cmd the root command of a plugin binary, shown as
// name (kubectl lock): it reads and writes s, prints no usage on errors
// (Main prints the error), and takes the connection flags.
func pluginCommand(cmd *cobra.Command, name string, s Streams, flags *Flags) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[cobra.CommandDisplayNameAnnotation] = name
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.CompletionOptions.HiddenDefaultCmd = true
	cmd.SetIn(s.In)
	cmd.SetOut(s.Out)
	cmd.SetErr(s.ErrOut)
	flags.AddFlags(cmd.PersistentFlags())
}

// contextOf returns the context a command runs with.
func contextOf(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
