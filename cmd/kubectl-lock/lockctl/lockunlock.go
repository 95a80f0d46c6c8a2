package lockctl

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// lockUnlockOptions are the flags of `kubectl lock unlock NAME`.
type lockUnlockOptions struct {
	flags   *Flags
	yes     bool
	timeout time.Duration
	dryRun  string
}

// newLockUnlockCommand returns `kubectl lock unlock NAME`: kubectl
// unlock's deletion (deleteLocks), of the one Lock named.
func newLockUnlockCommand(s Streams, flags *Flags) *cobra.Command {
	o := &lockUnlockOptions{flags: flags}
	cmd := &cobra.Command{
		Use:   "unlock NAME [--yes] [--dry-run=server|client]",
		Short: "Delete a Lock by its name, a selector Lock too",
		Long: `Show the Lock NAME of the namespace (-n), delete it (after asking, unless --yes),
and wait until it is gone. For a targetRef Lock whose target exists, also wait
until lockguard no longer denies the target's deletion because of it (checked
with a server-side dry-run DELETE, which deletes nothing), and say which other
Locks still protect the target, if any. A selector Lock (kubectl lock --selector
or --all) is deleted like any other: what it covered is then protected only by
the Locks that remain.

Deleting a Lock needs the RBAC verb unlock on it besides delete (the
ClusterRole lockguard-unlock, which edit and admin do not include): when it is
refused, kubectl lock unlock says which role you lack.

--dry-run=server sends the delete as a server-side dry run: RBAC and the unlock
check answer as for the real delete, and the Lock stays; --dry-run=client sends
no delete. Neither asks or waits.

To delete the Locks that target one resource: kubectl unlock TYPE/NAME.`,
		Example: `  # Delete the selector Lock tier-db, after confirming
  kubectl lock unlock tier-db -n forge

  # May I delete the Lock stack-forge? (the API server answers; nothing is deleted)
  kubectl lock unlock stack-forge -n forge --dry-run=server`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRoleHint(o.run(contextOf(cmd.Context()), s, args[0]))
		},
	}
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "Delete the Lock without asking.")
	cmd.Flags().DurationVar(&o.timeout, "timeout", defaultTimeout, "How long to wait for the Lock to be gone and its target's deletion allowed.")
	addDryRunFlag(cmd, &o.dryRun)
	return cmd
}

func (o *lockUnlockOptions) run(ctx context.Context, s Streams, name string) error {
	if err := checkDryRun(o.dryRun); err != nil {
		return err
	}
	c, err := o.flags.clients()
	if err != nil {
		return err
	}
	return o.unlock(ctx, s, c, name)
}

// unlock deletes the Lock name of c's namespace as run says.
func (o *lockUnlockOptions) unlock(ctx context.Context, s Streams, c *clients, name string) error {
	locks := c.dynamic.Resource(locksResource).Namespace(c.namespace)
	l, err := getLock(ctx, locks, name)
	if err != nil {
		return notFoundHint(err, c.namespace)
	}
	fmt.Fprintf(s.Out, "Lock %s in namespace %s:\n", name, c.namespace)
	if err := printScopeTable(s.Out, []lockv1alpha1.Lock{*l}); err != nil {
		return err
	}
	if err := confirmDelete(s, o.yes || dryRunning(o.dryRun), 1, "Lock"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	names, err := deleteLocks(ctx, s, c.locks(), []lockv1alpha1.Lock{*l}, o.dryRun)
	if err != nil || dryRunning(o.dryRun) {
		return err
	}
	t, ok := lockTarget(ctx, c, l)
	if !ok {
		return nil
	}
	return waitDeletable(ctx, s, c.dynamic.Resource(t.mapping.Resource).Namespace(c.namespace), t, c.namespace, names, false)
}

// lockTarget returns the target of a targetRef Lock, resolved, when its
// kind is served and the target exists: only then can a dry-run DELETE
// say whether the Lock still blocks it. Never for a selector Lock.
func lockTarget(ctx context.Context, c *clients, l *lockv1alpha1.Lock) (target, bool) {
	if l.HasSelector() || c.mapper == nil {
		return target{}, false
	}
	gk, err := l.Spec.TargetRef.GroupKind()
	if err != nil {
		return target{}, false
	}
	m, err := c.mapper.RESTMappingWithContext(ctx, gk)
	if err != nil {
		return target{}, false
	}
	t := target{mapping: m, name: l.Spec.TargetRef.Name}
	if _, err := c.dynamic.Resource(m.Resource).Namespace(c.namespace).Get(ctx, t.name, metav1.GetOptions{}); err != nil {
		return target{}, false
	}
	return t, true
}
