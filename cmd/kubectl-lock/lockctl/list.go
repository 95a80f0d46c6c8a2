package lockctl

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// listOptions are the flags of `kubectl lock list`.
type listOptions struct {
	flags         *Flags
	allNamespaces bool
	output        string
}

// newListCommand returns `kubectl lock list`.
func newListCommand(s Streams, flags *Flags) *cobra.Command {
	o := &listOptions{flags: flags}
	cmd := &cobra.Command{
		Use:   "list [-A] [-o json|yaml]",
		Short: "List what is locked, by which Lock, at which level, why, and the Lock's status",
		Long: `List the Locks of a namespace (or of all with -A, and then the ClusterLocks
too, which are cluster-scoped, in a second table after the line "ClusterLocks:"):

  SCOPE        what the Lock covers: Kind/name (Stack/forge) for a targetRef Lock,
               selector:LABELS (;kinds=... when it names kinds) for a
               selector Lock, <all> for the whole namespace (--all)
  LOCK         the Lock's name
  LEVEL        CanNotDelete (deletion is denied), or ReadOnly (changes to the
               spec and metadata are denied too) with whether the freeze is in
               force: "ReadOnly (in force)", or "ReadOnly (pending)" until
               lockguard reports its ReadOnly condition InForce
  STATUS       Active (deleting what it covers is denied), MissingReference (the
               target does not exist; it is protected as soon as it is
               created), InvalidTarget (the Lock can protect nothing), Expired
               (its expiresAt has passed: it protects nothing, and is kept as
               a record until deleted), Audit (spec.enforcement Audit: it
               refuses nothing, and records what it would refuse in
               status.lastWouldDeny), Pending (lockguard has not reported
               yet) or Deleting
  EXPIRES      when the Lock stops protecting (spec.expiresAt, RFC 3339 UTC)
               and how long until then, or how long ago; <none> if it never
               expires
  PROTECTED    how many resources the Lock covers now (status.protected.count;
               <none> until lockguard reports it)
  LAST DENIED  how long ago the Lock last refused a request, the operation and
               who sent it (status.lastDenied; <none> if it never did)
  REASON       the Lock's reason

-o json and -o yaml print the Locks themselves, as a List.`,
		Example: `  # What is locked in the current namespace
  kubectl lock list

  # Everywhere, as YAML
  kubectl lock list -A -o yaml`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(contextOf(cmd.Context()), s)
		},
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List the Locks of every namespace, and the ClusterLocks.")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml.")
	return cmd
}

func (o *listOptions) run(ctx context.Context, s Streams) error {
	if err := outputFormat(o.output); err != nil {
		return err
	}
	c, err := o.flags.clients()
	if err != nil {
		return err
	}
	var locks lockClient = c.dynamic.Resource(locksResource)
	if !o.allNamespaces {
		locks = c.dynamic.Resource(locksResource).Namespace(c.namespace)
	}
	items, err := listLocks(ctx, locks)
	if err != nil {
		return err
	}
	sortLocks(items)
	var clusterLocks []lockv1alpha1.Lock
	if o.allNamespaces {
		if clusterLocks, err = listClusterLocks(ctx, s, c); err != nil {
			return err
		}
	}
	if o.output != "" {
		all := make([]any, 0, len(items)+len(clusterLocks))
		for i := range items {
			items[i].ManagedFields = nil // as kubectl prints objects
			all = append(all, &items[i])
		}
		for i := range clusterLocks {
			all = append(all, asClusterLock(&clusterLocks[i]))
		}
		return printObject(s.Out, o.output, map[string]any{
			"apiVersion": "v1",
			"kind":       "List",
			"metadata":   map[string]any{"resourceVersion": ""},
			"items":      all,
		})
	}
	if len(clusterLocks) > 0 {
		defer printClusterLockTable(s.Out, clusterLocks, len(items) > 0)
	}
	if len(items) == 0 {
		if o.allNamespaces {
			fmt.Fprintln(s.ErrOut, "No Locks found.")
		} else {
			fmt.Fprintf(s.ErrOut, "No Locks found in %s namespace.\n", c.namespace)
		}
		return nil
	}
	return printLockTable(s.Out, items, o.allNamespaces, clock())
}

// sortLocks orders Locks by namespace, target and name.
func sortLocks(items []lockv1alpha1.Lock) {
	slices.SortFunc(items, func(a, b lockv1alpha1.Lock) int {
		return strings.Compare(a.Namespace+"\x00"+scopeString(&a)+"\x00"+a.Name, b.Namespace+"\x00"+scopeString(&b)+"\x00"+b.Name)
	})
}

// printLockTable prints Locks in kubectl's table style, the ages of their
// last denials as of now.
func printLockTable(w io.Writer, items []lockv1alpha1.Lock, namespaces bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if namespaces {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, "SCOPE\tLOCK\tLEVEL\tSTATUS\tEXPIRES\tPROTECTED\tLAST DENIED\tREASON")
	for i := range items {
		l := &items[i]
		if namespaces {
			fmt.Fprintf(tw, "%s\t", l.Namespace)
		}
		reason := l.Spec.Reason
		if reason == "" {
			reason = "<none>"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", scopeString(l), l.Name, levelString(l), lockStatusAt(l, now), expiresCell(l, now), protectedCount(l), lastDenied(l, now), oneLine(reason))
	}
	return tw.Flush()
}

// protectedCount is the PROTECTED cell of l: how many resources it
// covers now, <none> until lockguard reports it.
func protectedCount(l *lockv1alpha1.Lock) string {
	if l.Status.Protected == nil {
		return "<none>"
	}
	return strconv.Itoa(int(l.Status.Protected.Count))
}

// lastDenied is the LAST DENIED cell of l as of now: how long ago it last
// refused a request, the operation and the user, e.g. "5m DELETE by
// alice"; <none> if it never did.
func lastDenied(l *lockv1alpha1.Lock, now time.Time) string {
	d := l.Status.LastDenied
	if d == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s %s by %s", duration.HumanDuration(now.Sub(d.Time.Time)), d.Operation, oneLine(d.User))
}

// oneLine keeps a table row on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// reasonCell is a Lock's reason as a table cell: on one line, <none>
// when it gives none.
func reasonCell(reason string) string {
	if reason == "" {
		return "<none>"
	}
	return oneLine(reason)
}
