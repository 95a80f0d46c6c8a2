package doccheck

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The house's size limits, in lines (newline characters, as wc -l counts
// them). A production Go file is one that is not a test, not generated
// (zz_generated) and not under e2e/ or hack/ (the test machinery and the
// tools), as the house's pre-stop check counts them.
const (
	maxProductionLines = 400
	maxTestLines       = 800
	maxReadmeLines     = 400 // README.md at the root: the newcomer's page
	maxDocLines        = 600 // every file under docs/ but docs/history/
)

// oversized lists the Go files that were over their limit when the limits
// came in, with their size then. A listed file may shrink, not grow; once
// it is within its limit it must leave the list, so that the list never
// hides a file that grows back. No file may join it. Issue 37 split the
// seven it started with: it is empty.
var oversized = map[string]int{}

// skipped are the directories the limits do not walk into: git's, and
// what builds write (the tools, control planes and releases).
var skipped = []string{".git", "bin", "dist"}

// TestLimits fails for every file of the repository over its size limit:
// production Go files over 400 lines, test files over 800, the README over
// 400 and docs/ files over 600 (run logs go to docs/history/, which has
// no limit).
func TestLimits(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	problems, err := checkLimits(root, oversized)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// checkLimits walks the repository at root and returns a sentence for
// every file over its limit (but those of allowed, up to their size there)
// and for every entry of allowed that is missing or within its limit.
func checkLimits(root string, allowed map[string]int) ([]string, error) {
	var problems []string
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if slices.Contains(skipped, rel) {
				return filepath.SkipDir
			}
			return nil
		}
		limit, what := limitOf(rel)
		if limit == 0 {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines := bytes.Count(data, []byte("\n"))
		if was, ok := allowed[rel]; ok {
			seen[rel] = true
			switch {
			case lines <= limit:
				problems = append(problems, fmt.Sprintf("%s: %d lines, within the limit of %d for %s: remove it from oversized", rel, lines, limit, what))
			case lines > was:
				problems = append(problems, fmt.Sprintf("%s: %d lines, more than the %d it had when the limits came in (limit %d for %s): split it by concern, do not grow it", rel, lines, was, limit, what))
			}
			return nil
		}
		if lines > limit {
			problems = append(problems, fmt.Sprintf("%s: %d lines, over the limit of %d for %s: %s", rel, lines, limit, what, remedy(what)))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for rel := range allowed {
		if !seen[rel] {
			problems = append(problems, fmt.Sprintf("%s: no such file: remove it from oversized", rel))
		}
	}
	slices.Sort(problems)
	return problems, nil
}

// limitOf returns the size limit of the file rel (slash-separated, from
// the repository's root) and what kind of file that makes it, or 0 when it
// has none.
func limitOf(rel string) (int, string) {
	switch {
	case strings.HasSuffix(rel, "_test.go"):
		return maxTestLines, "a test file"
	case strings.HasSuffix(rel, ".go"):
		if strings.Contains(rel, "zz_generated") || strings.HasPrefix(rel, "e2e/") || strings.HasPrefix(rel, "hack/") {
			return 0, ""
		}
		return maxProductionLines, "a production file"
	case rel == "README.md":
		return maxReadmeLines, "the README"
	case strings.HasPrefix(rel, "docs/history/"):
		return 0, ""
	case strings.HasPrefix(rel, "docs/"):
		return maxDocLines, "a docs/ file"
	}
	return 0, ""
}

// remedy says what to do with a file of the kind what that is too long.
func remedy(what string) string {
	switch what {
	case "the README":
		return "move detail to docs/"
	case "a docs/ file":
		return "split it, or move a run log to docs/history/"
	}
	return "split it by concern"
}

// TestLimitsFail builds a repository in a temporary directory with a file
// just over and one just at each limit, and checks that checkLimits names
// exactly the ones over, the allowed file that grew and the allowed file
// that no longer needs to be allowed.
func TestLimitsFail(t *testing.T) {
	root := t.TempDir()
	files := map[string]int{
		"webhook/new.go":                 401, // over
		"webhook/ok.go":                  400,
		"webhook/ok_test.go":             800,
		"controller/big_test.go":         801, // over
		"e2e/framework/big_test.go":      801, // over: tests are tests wherever they are
		"e2e/framework/helpers.go":       900,
		"hack/bench/report.go":           900,
		"api/v1alpha1/zz_generated.go":   900,
		"README.md":                      401, // over
		"e2e/README.md":                  500,
		"docs/usage.md":                  601, // over
		"docs/limits.md":                 600,
		"docs/history/test-times.md":     2000,
		"bin/k8s/v1.37.2/src/x.go":       900,
		"internal/grown/grown.go":        425, // allowed at 424: grew
		"internal/kept/kept.go":          424, // allowed at 424
		"internal/shrunk/shrunk.go":      400, // allowed at 424: now within
		"internal/shrunk/shrunk_test.go": 10,
	}
	for rel, lines := range files {
		path := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.Repeat("x\n", lines)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	allowed := map[string]int{
		"internal/grown/grown.go":   424,
		"internal/kept/kept.go":     424,
		"internal/shrunk/shrunk.go": 424,
		"internal/gone/gone.go":     500,
	}
	got, err := checkLimits(root, allowed)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md: 401 lines, over the limit of 400 for the README: move detail to docs/",
		"controller/big_test.go: 801 lines, over the limit of 800 for a test file: split it by concern",
		"docs/usage.md: 601 lines, over the limit of 600 for a docs/ file: split it, or move a run log to docs/history/",
		"e2e/framework/big_test.go: 801 lines, over the limit of 800 for a test file: split it by concern",
		"internal/gone/gone.go: no such file: remove it from oversized",
		"internal/grown/grown.go: 425 lines, more than the 424 it had when the limits came in (limit 400 for a production file): split it by concern, do not grow it",
		"internal/shrunk/shrunk.go: 400 lines, within the limit of 400 for a production file: remove it from oversized",
		"webhook/new.go: 401 lines, over the limit of 400 for a production file: split it by concern",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("checkLimits(a tree with files at and over each limit): -want, +got:\n%s", diff)
	}
}
