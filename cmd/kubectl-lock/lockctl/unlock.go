package lockctl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// unlockOptions are the flags of `kubectl unlock TYPE/NAME`.
type unlockOptions struct {
	flags   Flags
	yes     bool
	timeout time.Duration
}

// NewUnlockCommand returns `kubectl unlock` (the kubectl-unlock binary):
// it shows the Locks that protect TYPE/NAME, deletes them once confirmed,
// and waits until lockguard no longer denies the resource's deletion.
func NewUnlockCommand(s Streams) *cobra.Command {
	o := &unlockOptions{}
	cmd := &cobra.Command{
		Use:   "unlock TYPE/NAME [--yes]",
		Short: "Delete the Locks that protect a core.navique.com resource",
		Long: `Show the Locks that protect TYPE/NAME in its namespace, delete them (after asking,
unless --yes), and wait until lockguard allows the resource's deletion (checked
with a server-side dry-run DELETE, which deletes nothing).

It deletes only Locks that target TYPE/NAME (spec.targetRef), never a selector
Lock (kubectl lock --selector or --all), which protects other resources too.
When selector Locks cover TYPE/NAME, it names them, deletes nothing and fails:
delete them by name (kubectl delete lock NAME) if nothing else needs them, then
run kubectl unlock again.

Deleting a Lock needs the RBAC verb unlock on it besides delete (the
ClusterRole lockguard-unlock, which edit and admin do not include): when it
is refused, kubectl unlock says which role you lack.

TYPE is resolved as kubectl does (stack, stacks, Stack or stacks.core.navique.com).`,
		Example: `  # Lift the protection of the Stack forge, after confirming
  kubectl unlock stack/forge -n forge

  # Without the question, then delete the Stack
  kubectl unlock stack/forge -n forge --yes && kubectl delete stack forge -n forge`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRoleHint(o.run(contextOf(cmd.Context()), s, args[0]))
		},
	}
	pluginCommand(cmd, "kubectl unlock", s, &o.flags)
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "Delete the Locks without asking.")
	cmd.Flags().DurationVar(&o.timeout, "timeout", defaultTimeout, "How long to wait for the Locks to be gone and the deletion allowed.")
	return cmd
}

func (o *unlockOptions) run(ctx context.Context, s Streams, arg string) error {
	c, t, err := o.flags.target(ctx, arg)
	if err != nil {
		return err
	}
	locks := c.dynamic.Resource(locksResource).Namespace(c.namespace)
	all, err := listLocks(ctx, locks)
	if err != nil {
		return err
	}
	var protecting []lockv1alpha1.Lock
	for i := range all {
		if targets(&all[i], t) && all[i].DeletionTimestamp == nil {
			protecting = append(protecting, all[i])
		}
	}
	selectors, err := coveringSelectors(ctx, c, t, all)
	if err != nil {
		return err
	}
	if len(selectors) > 0 {
		return refuseSelectors(s, t, c.namespace, selectors, protecting)
	}
	if len(protecting) == 0 {
		fmt.Fprintf(s.ErrOut, "No Locks protect %s in namespace %s.\n", t, c.namespace)
		return nil
	}
	sortLocks(protecting)
	fmt.Fprintf(s.Out, "Locks protecting %s in namespace %s:\n", t, c.namespace)
	tw := tabwriter.NewWriter(s.Out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tSTATUS\tREASON")
	for i := range protecting {
		l := &protecting[i]
		reason := l.Spec.Reason
		if reason == "" {
			reason = "<none>"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", l.Name, lockStatus(l), oneLine(reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !o.yes {
		ok, err := confirm(s, fmt.Sprintf("Delete %d Lock(s)? [y/N]: ", len(protecting)))
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("not confirmed: no Lock deleted (--yes skips the question)")
		}
	}

	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	names := make([]string, 0, len(protecting))
	for i := range protecting {
		l := &protecting[i]
		// The UID precondition leaves alone a Lock of the same name created
		// since it was listed.
		err := locks.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &l.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		fmt.Fprintf(s.Out, "%s/%s deleted\n", lockGroupResource, l.Name)
		names = append(names, l.Name)
	}
	for i := range protecting {
		if err := waitGone(ctx, locks, &protecting[i]); err != nil {
			return err
		}
	}
	return waitDeletable(ctx, s, c.dynamic.Resource(t.mapping.Resource).Namespace(c.namespace), t, c.namespace, names)
}

// coveringSelectors returns the selector Locks among locks that cover t
// as it is now (Lock.Covers, with its labels: the rule lockguard's guards
// decide with), sorted; none when t does not exist.
func coveringSelectors(ctx context.Context, c *clients, t target, locks []lockv1alpha1.Lock) ([]lockv1alpha1.Lock, error) {
	obj, err := c.dynamic.Resource(t.mapping.Resource).Namespace(c.namespace).Get(ctx, t.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	gk := t.mapping.GroupVersionKind.GroupKind()
	o := lockv1alpha1.Object{Namespace: c.namespace, Group: gk.Group, Kind: gk.Kind, Name: t.name, Labels: obj.GetLabels()}
	var out []lockv1alpha1.Lock
	now := clock()
	for i := range locks {
		if locks[i].HasSelector() && locks[i].Covers(o, now) {
			out = append(out, locks[i])
		}
	}
	sortLocks(out)
	return out, nil
}

// refuseSelectors prints the selector Locks that cover t and returns the
// error that says kubectl unlock deletes none of them, nor the Locks that
// target t (protecting), and how to proceed.
func refuseSelectors(s Streams, t target, ns string, selectors, protecting []lockv1alpha1.Lock) error {
	fmt.Fprintf(s.Out, "Selector Locks covering %s in namespace %s (they protect other resources too):\n", t, ns)
	tw := tabwriter.NewWriter(s.Out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tSCOPE\tLEVEL\tSTATUS\tPROTECTED\tREASON")
	names := make([]string, 0, len(selectors))
	for i := range selectors {
		l := &selectors[i]
		reason := l.Spec.Reason
		if reason == "" {
			reason = "<none>"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.Name, scopeString(l), levelString(l), lockStatus(l), protectedCount(l), oneLine(reason))
		names = append(names, l.Name)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	kept := ""
	if len(protecting) > 0 {
		targeting := make([]string, 0, len(protecting))
		for i := range protecting {
			targeting = append(targeting, protecting[i].Name)
		}
		slices.Sort(targeting)
		kept = fmt.Sprintf(", not even the Lock(s) %v that target it", targeting)
	}
	return fmt.Errorf("no Lock deleted%s: kubectl unlock never deletes a selector Lock, which protects other resources too; "+
		"if nothing else needs them, delete the selector Lock(s) by name (kubectl delete lock %s -n %s), then run kubectl unlock again",
		kept, strings.Join(names, " "), ns)
}

// confirm asks a yes/no question on the streams; only y or yes is yes.
func confirm(s Streams, question string) (bool, error) {
	fmt.Fprint(s.Out, question)
	line, err := bufio.NewReader(s.In).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	if errors.Is(err, io.EOF) {
		fmt.Fprintln(s.Out)
	}
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes", nil
}

// waitGone waits until the Lock (this UID) no longer exists.
func waitGone(ctx context.Context, locks lockClient, l *lockv1alpha1.Lock) error {
	for {
		cur, err := getLock(ctx, locks, l.Name)
		if apierrors.IsNotFound(err) || (err == nil && cur.UID != l.UID) {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s/%s is still there: %w", lockGroupResource, l.Name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitDeletable waits until a server-side dry-run DELETE of the target is
// no longer denied by the deleted Locks: lockguard's cache drops a deleted
// Lock a moment after the API server. A denial by other Locks (a cascade
// to locked dependents, say) is reported at once; a dry-run refused for
// another reason (RBAC) only means it could not be checked.
func waitDeletable(ctx context.Context, s Streams, res dynamic.ResourceInterface, t target, ns string, deleted []string) error {
	for {
		err := res.Delete(ctx, t.name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err == nil:
			fmt.Fprintf(s.Out, "%s in namespace %s is unlocked: it can be deleted\n", t, ns)
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("the Locks are deleted, but deleting %s is still denied: %w", t, err)
		}
		blocking := deniedBy(err)
		if blocking == nil {
			fmt.Fprintf(s.ErrOut, "Warning: could not check that %s can be deleted now: %v\n", t, err)
			return nil
		}
		if !slices.ContainsFunc(blocking, func(n string) bool { return slices.Contains(deleted, n) }) {
			return fmt.Errorf("the Locks are deleted, but deleting %s is still denied: %w", t, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// deniedBy returns the Lock names of a lockguard denial ("... Lock(s)
// [a b]; ..."), or nil when err is not one.
func deniedBy(err error) []string {
	if !apierrors.IsForbidden(err) {
		return nil
	}
	return lockNamesIn(err.Error())
}
