package lockctl

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/duration"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// showOptions are the flags of `kubectl lock show`.
type showOptions struct {
	flags  *Flags
	output string
}

// newShowCommand returns `kubectl lock show`.
func newShowCommand(s Streams, flags *Flags) *cobra.Command {
	o := &showOptions{flags: flags}
	cmd := &cobra.Command{
		Use:   "show (NAME | clusterlock/NAME) [-o json|yaml]",
		Short: "Show one Lock: what it covers, how, until when, its status and its last refusals",
		Long: `Show the Lock NAME of the namespace (-n), or the ClusterLock NAME with
clusterlock/NAME (clusterlocks/NAME, clusterlock.core.navique.com/NAME):

  Scope         what it covers: Kind/name (spec.targetRef), selector:LABELS
                (spec.selector), or <all>: the namespace and everything in it
  Level         CanNotDelete, or ReadOnly with whether its freeze is in force
  Enforcement   Enforce (it refuses), or Audit (it refuses nothing and records
                what it would refuse)
  Reason        spec.reason
  Expires       spec.expiresAt and how long until then, or "expired" and how
                long ago (it then protects nothing); never if it has none
  Status        Active, Audit, MissingReference, InvalidTarget, Expired,
                Pending or Deleting, with the Ready condition's message
  Conditions    each condition lockguard reports: type, status, reason, message
  Protected     how many resources it covers now and (up to ten of) which,
                as lockguard last reported them (status.protected)
  Last denied   the last request it refused: when, the operation, the object,
                who, and how many so far (status.lastDenied)
  Last would-deny
                in Audit, the last request it would have refused
                (status.lastWouldDeny)
  Last exception
                the last request a break-glass LockException let through
                it, and which exception (status.lastException)

-o json and -o yaml print the Lock itself, without managed fields.`,
		Example: `  # The Lock stack-forge of namespace forge
  kubectl lock show stack-forge -n forge

  # As YAML
  kubectl lock show stack-forge -n forge -o yaml

  # The ClusterLock namespace-prod
  kubectl lock show clusterlock/namespace-prod`,
		Args:          cobra.ExactArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRoleHint(o.run(contextOf(cmd.Context()), s, args[0]))
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml prints the Lock.")
	return cmd
}

func (o *showOptions) run(ctx context.Context, s Streams, name string) error {
	if err := outputFormat(o.output); err != nil {
		return err
	}
	c, err := o.flags.clients()
	if err != nil {
		return err
	}
	if typ, rest, ok := strings.Cut(name, "/"); ok && isClusterLockType(typ) {
		return showLock(ctx, s, c.dynamic.Resource(clusterLocksResource), "", rest, o.output)
	}
	return showLock(ctx, s, c.dynamic.Resource(locksResource).Namespace(c.namespace), c.namespace, name, o.output)
}

// showLock reads the Lock name of namespace ns and prints it: its summary
// (printLockSummary) or, with output json or yaml, the Lock.
func showLock(ctx context.Context, s Streams, locks lockClient, ns, name, output string) error {
	l, err := getLock(ctx, locks, name)
	if err != nil {
		return notFoundHint(err, ns)
	}
	if output != "" {
		l.ManagedFields = nil // as kubectl prints objects
		if ns == "" {
			return printObject(s.Out, output, asClusterLock(l))
		}
		return printObject(s.Out, output, l)
	}
	return printLockSummary(s.Out, l, clock())
}

// notFoundHint returns err, followed by where to find the Locks there
// are, when err says that the Lock does not exist; any other error as it
// is.
func notFoundHint(err error, ns string) error {
	if !apierrors.IsNotFound(err) {
		return err
	}
	if ns == "" {
		return fmt.Errorf("%w\nNo ClusterLock of that name: kubectl lock list -A lists the ClusterLocks", err)
	}
	return fmt.Errorf("%w\nNo Lock of that name in namespace %s: kubectl lock list -n %s lists its Locks (kubectl lock list -A, those of every namespace)", err, ns, ns)
}

// printLockSummary writes what kubectl lock show says of l as of now.
func printLockSummary(w io.Writer, l *lockv1alpha1.Lock, now time.Time) error {
	row := func(key, value string) { fmt.Fprintf(w, "%-17s%s\n", key+":", value) }
	row("Name", l.Name)
	if l.Kind == "ClusterLock" {
		row("Kind", "ClusterLock (cluster-scoped)")
	} else {
		row("Namespace", l.Namespace)
	}
	row("Scope", scopeSentence(l))
	row("Level", levelString(l))
	enforcement := string(enforcementOf(l))
	if !l.Enforces() {
		enforcement += " (it refuses nothing: each request it would refuse is allowed with a warning and recorded in Last would-deny)"
	}
	row("Enforcement", enforcement)
	reason := l.Spec.Reason
	if reason == "" {
		reason = "<none>"
	}
	row("Reason", oneLine(reason))
	row("Expires", expiresSentence(l, now))
	status := lockStatusAt(l, now)
	if m := readyMessage(l); m != "" {
		status += ": " + oneLine(m)
	}
	row("Status", status)
	if len(l.Status.Conditions) == 0 {
		row("Conditions", "<none> (lockguard has not reported on this Lock yet)")
	} else {
		fmt.Fprintln(w, "Conditions:")
		tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
		fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tMESSAGE")
		for _, c := range l.Status.Conditions {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, oneLine(c.Message))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	row("Protected", protectedSentence(l))
	row("Last denied", deniedSentence(l.Status.LastDenied, now, "refused"))
	row("Last would-deny", deniedSentence(l.Status.LastWouldDeny, now, "would have been refused"))
	last := deniedSentence(l.Status.LastException, now, "let through by exceptions")
	if e := l.Status.LastException; e != nil && e.Exception != "" {
		last += "; by LockException " + e.Exception
	}
	row("Last exception", last)
	return nil
}

// scopeSentence says what l covers: its scope (scopeString) and what that
// means.
func scopeSentence(l *lockv1alpha1.Lock) string {
	switch s := l.Spec.Selector; {
	case s == nil:
		return scopeString(l) + " (spec.targetRef: this one resource)"
	case s.IsEmpty():
		return scopeString(l) + " (spec.selector {}: the namespace and every resource in it, now and later)"
	}
	return scopeString(l) + " (spec.selector: the resources of the namespace whose labels match, now and later)"
}

// expiresSentence says when l expires as of now: never, its expiresAt
// and how long until then, or that it has expired and how long ago.
func expiresSentence(l *lockv1alpha1.Lock, now time.Time) string {
	switch {
	case l.Spec.ExpiresAt == nil:
		return "never"
	case l.ExpiredAt(now):
		return fmt.Sprintf("%s (expired %s ago: it protects nothing)", l.ExpiresAtString(), duration.HumanDuration(now.Sub(l.Spec.ExpiresAt.Time)))
	}
	return fmt.Sprintf("%s (in %s)", l.ExpiresAtString(), duration.HumanDuration(l.Spec.ExpiresAt.Sub(now)))
}

// protectedSentence says how many resources l covers now and which, as
// its status.protected says.
func protectedSentence(l *lockv1alpha1.Lock) string {
	p := l.Status.Protected
	if p == nil {
		return "<unknown> (lockguard has not reported it yet)"
	}
	var b strings.Builder
	switch p.Count {
	case 0:
		b.WriteString("no resource now")
	case 1:
		b.WriteString("1 resource now")
	default:
		fmt.Fprintf(&b, "%d resources now", p.Count)
	}
	if s := l.Spec.Selector; s != nil && s.IsEmpty() {
		b.WriteString(", and the namespace itself")
	}
	if len(p.Resources) > 0 {
		names := make([]string, 0, len(p.Resources))
		for _, r := range p.Resources {
			names = append(names, r.Kind+"/"+r.Name)
		}
		fmt.Fprintf(&b, ": %s", strings.Join(names, ", "))
		if more := int(p.Count) - len(p.Resources); more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
	}
	return b.String()
}

// deniedSentence says what d records as of now: when, the operation, the
// object, who, and how many requests were so far (what: refused, or would
// have been refused); <none> for no record.
func deniedSentence(d *lockv1alpha1.DeniedRequest, now time.Time, what string) string {
	if d == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s %s/%s by %s, %s ago (%s); %d %s so far", d.Operation, d.Kind, d.Name, oneLine(d.User),
		duration.HumanDuration(now.Sub(d.Time.Time)), d.Time.UTC().Format(time.RFC3339), d.Count, what)
}
