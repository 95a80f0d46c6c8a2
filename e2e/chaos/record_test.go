//go:build chaos

package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/navique/lockguard/e2e/framework"
)

// A recorder writes a run's summary into a Markdown file (make chaos:
// docs/reliability.md), between the markers
//
//	<!-- chaos VERSION:begin -->
//	<!-- chaos VERSION:end -->
//
// for the run's Kubernetes VERSION, with the command, the commit, the
// date, the verdict and the wall time of the run that wrote it. The block
// is generated: the documentation's prose quotes no number it does not
// hold.
type recorder struct {
	path    string // LOCKGUARD_CHAOS_RECORD; empty: record nothing
	command string // LOCKGUARD_CHAOS_COMMAND: how the run was started
	commit  string
	began   time.Time
}

// startRecord returns the recorder of this run, taking the commit now,
// before the run.
func startRecord() *recorder {
	r := &recorder{path: os.Getenv("LOCKGUARD_CHAOS_RECORD"), command: os.Getenv("LOCKGUARD_CHAOS_COMMAND"), began: time.Now()}
	if r.command == "" {
		r.command = "go test -tags chaos ./e2e/chaos/"
	}
	if r.path != "" {
		r.commit = commit(r.path)
	}
	return r
}

// commit describes the checkout's HEAD: its short hash, and whether files
// other than the record itself differ from it.
func commit(record string) string {
	root, err := framework.RepoRoot()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	head, err := git("rev-parse", "--short=12", "HEAD")
	if err != nil {
		return "unknown (git: " + err.Error() + ")"
	}
	spec := []string{"status", "--porcelain", "--", "."}
	if rel, err := filepath.Rel(root, record); err == nil && !strings.HasPrefix(rel, "..") {
		spec = append(spec, ":(exclude)"+rel)
	}
	if dirty, err := git(spec...); err != nil || dirty != "" {
		return head + " with uncommitted changes"
	}
	return head
}

// write puts the summary of a run on Kubernetes version, passed or not,
// into the record file.
func (r *recorder) write(passed bool, version string, summary []string) error {
	if r.path == "" {
		return nil
	}
	data, err := os.ReadFile(r.path)
	if err != nil {
		return err
	}
	begin, end := fmt.Sprintf("<!-- chaos %s:begin -->", version), fmt.Sprintf("<!-- chaos %s:end -->", version)
	doc := string(data)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s ... %s: add the markers where the run of Kubernetes %s goes", r.path, begin, end, version)
	}
	verdict := "PASS"
	if !passed {
		verdict = "FAIL"
	}
	load := "unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Fields(string(b))[0]
	}
	var b strings.Builder
	b.WriteString(begin + "\n")
	b.WriteString("<!-- Written by the run (e2e/chaos/record_test.go); do not edit. -->\n")
	fmt.Fprintf(&b, "`%s` on commit `%s`, %s: **%s** in %s (the test from start to end), %d cores, load average %s at the end.\n\n",
		r.command, r.commit, r.began.UTC().Format("2006-01-02 15:04 UTC"), verdict, time.Since(r.began).Round(time.Second), runtime.NumCPU(), load)
	b.WriteString("```\n")
	for _, line := range summary {
		b.WriteString(line + "\n")
	}
	b.WriteString("```\n")
	doc = doc[:i] + b.String() + doc[j:]
	if err := os.WriteFile(r.path, []byte(doc), 0o644); err != nil {
		return err
	}
	fmt.Printf("chaos: recorded the run in %s\n", r.path)
	return nil
}
