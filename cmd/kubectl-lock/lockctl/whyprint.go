package lockctl

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// String names the target the way kubectl does: stack.core.navique.com/forge
// in namespace forge, namespace/forge, customresourcedefinition.apiextensions.k8s.io/NAME.
func (t whyTarget) String() string {
	s := strings.ToLower(t.Kind)
	if t.Group != "" {
		s += "." + t.Group
	}
	s += "/" + t.Name
	if t.Namespace != "" {
		s += " in namespace " + t.Namespace
	}
	return s
}

// verdict is the decision in a few words.
func (d whyDecision) verdict() string {
	switch {
	case d.Blocked:
		return "denied by lockguard"
	case d.DecidedBy == decidedByNotGuarded:
		return "not blocked by lockguard (not guarded)"
	}
	return "allowed by lockguard"
}

// print writes the report as text.
func (r *whyReport) print(w io.Writer) error {
	fmt.Fprintf(w, "DELETE %s: %s\n", r.Target, r.Deletion.verdict())
	if r.Deletion.Message != "" {
		fmt.Fprintf(w, "  %s\n", r.Deletion.Message)
	}
	for _, warning := range r.Deletion.Warnings {
		fmt.Fprintf(w, "  Warning: %s\n", warning)
	}
	if r.Target.Namespace != "" {
		fmt.Fprintln(w)
		if len(r.Direct) == 0 {
			fmt.Fprintln(w, "Directly: no live Lock covers it.")
		} else {
			fmt.Fprintln(w, "Directly, the Locks that cover it (target it, or select it by its labels):")
			if err := printWhyLocks(w, r.Direct, false); err != nil {
				return err
			}
		}
		fmt.Fprintln(w)
		if len(r.Descendants) == 0 {
			fmt.Fprintln(w, "Through descendants: none of the objects it owns is locked.")
		} else {
			fmt.Fprintln(w, "Through descendants, the locked objects it owns (through ownerReferences):")
			tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "DESCENDANT\tOWNED THROUGH\tLOCKS")
			for _, d := range r.Descendants {
				fmt.Fprintf(tw, "%s/%s\t%s\t%s\n", d.Kind, d.Name, strings.Join(d.OwnerPath, " > "), strings.Join(d.Locks, ","))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		fmt.Fprintln(w)
		if err := r.printSelectors(w); err != nil {
			return err
		}
		if r.Update != nil {
			fmt.Fprintln(w)
			if err := r.printUpdate(w); err != nil {
				return err
			}
		}
	} else {
		fmt.Fprintln(w)
		if len(r.ClusterLocks) == 0 {
			fmt.Fprintln(w, "No ClusterLock names it.")
		} else {
			fmt.Fprintln(w, "The ClusterLocks that name it:")
			if err := printWhyLocks(w, r.ClusterLocks, false); err != nil {
				return err
			}
		}
	}
	if r.Target.Namespace == "" && (r.Target.Kind == namespaceGVK.Kind || r.Target.Kind == crdGVK.Kind && r.Target.Group == crdGVK.Group) {
		qualified := r.Target.Kind != namespaceGVK.Kind
		fmt.Fprintln(w)
		if len(r.Inside) == 0 {
			fmt.Fprintln(w, "Inside it: no live Lock on an existing object.")
		} else {
			fmt.Fprintln(w, "Inside it, the live Locks on existing objects:")
			if err := printWhyLocks(w, r.Inside, qualified); err != nil {
				return err
			}
		}
		if len(r.ProtectNothing) > 0 {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "Live Locks whose targets do not exist (they protect nothing until the target is created):")
			if err := printWhyLocks(w, r.ProtectNothing, qualified); err != nil {
				return err
			}
		}
	}
	if r.Target.Namespace == "" && r.Update != nil {
		fmt.Fprintln(w)
		if err := r.printUpdate(w); err != nil {
			return err
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range r.Notes {
			fmt.Fprintln(w, n)
		}
	}
	return nil
}

// printSelectors prints the selector verdicts of a resource.
func (r *whyReport) printSelectors(w io.Writer) error {
	if len(r.Selectors) == 0 {
		fmt.Fprintf(w, "Selector Locks: none in namespace %s.\n", r.Target.Namespace)
		return nil
	}
	fmt.Fprintf(w, "Selector Locks of namespace %s, against its labels (%s):\n", r.Target.Namespace, labelsString(r.Target.Labels))
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tSELECTOR\tLEVEL\tCOVERS\tREQUIREMENTS")
	for _, sel := range r.Selectors {
		covers := "no"
		if sel.Covers {
			covers = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", sel.Name, sel.Selector, sel.Level, covers, requirementsString(sel.Requirements))
	}
	return tw.Flush()
}

// printUpdate prints the update verdict of a resource.
func (r *whyReport) printUpdate(w io.Writer) error {
	fmt.Fprintf(w, "UPDATE %s: %s\n", r.Target, r.Update.verdict())
	fmt.Fprintf(w, "  %s\n", r.Update.Message)
	if a := r.Update.Answer; a != "" && a != "allowed" {
		fmt.Fprintf(w, "  the API server's answer: %s\n", oneLine(a))
	}
	if len(r.Update.Locks) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tSCOPE\tFREEZE\tMESSAGE")
	for _, l := range r.Update.Locks {
		msg := l.Message
		if msg == "" {
			msg = "<none>"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Name, l.Scope, l.Freeze, oneLine(msg))
	}
	return tw.Flush()
}

// printWhyLocks prints Locks as a table, with their namespace if
// namespaces.
func printWhyLocks(w io.Writer, locks []whyLock, namespaces bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if namespaces {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, "LOCK\tTARGET\tSTATUS\tREASON")
	for _, l := range locks {
		if namespaces {
			fmt.Fprintf(tw, "%s\t", l.Namespace)
		}
		reason := l.Reason
		if reason == "" {
			reason = "<none>"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Name, l.Target, l.Status, oneLine(reason))
	}
	return tw.Flush()
}
