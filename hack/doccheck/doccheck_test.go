package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// checked lists the Markdown files whose links are checked, relative to the
// repository root; a pattern may match several files.
var checked = []string{
	"README.md",
	"CHANGELOG.md",
	"docs/*.md",
	"docs/history/*.md",
	"e2e/README.md",
	"deploy/chart/lockguard/README.md",
}

// TestLinksResolve fails for every relative link, in the files of checked,
// whose file is not in the repository or whose #anchor names no heading.
func TestLinksResolve(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	var files []string
	for _, pattern := range checked {
		matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pattern)))
		if err != nil {
			t.Fatal(err)
		}
		if len(matches) == 0 {
			t.Errorf("%s: no such file", pattern)
		}
		files = append(files, matches...)
	}
	anchors := map[string][]string{} // file -> its anchors, read once
	anchorsOf := func(file string) ([]string, error) {
		if a, ok := anchors[file]; ok {
			return a, nil
		}
		src, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		a, _ := parse(string(src))
		anchors[file] = a
		return a, nil
	}
	checkedLinks := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		_, links := parse(string(src))
		for _, l := range links {
			if msg := resolve(root, file, l.target, anchorsOf); msg != "" {
				t.Errorf("%s:%d: link %q: %s", filepath.ToSlash(rel), l.line, l.target, msg)
			}
			checkedLinks++
		}
	}
	t.Logf("%d links in %d files", checkedLinks, len(files))
}

// resolve says what is wrong with target, a link in file, or "" when it
// resolves (or is not relative: a URL with a scheme is not checked).
func resolve(root, file, target string, anchorsOf func(string) ([]string, error)) string {
	if isExternal(target) {
		return ""
	}
	path, frag, _ := strings.Cut(target, "#")
	dest := file
	if path != "" {
		if strings.HasPrefix(path, "/") {
			return "absolute path: write it relative to this file"
		}
		dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
		if r, err := filepath.Rel(root, dest); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return "outside the repository"
		}
		if _, err := os.Stat(dest); err != nil {
			return "no such file or directory"
		}
	}
	if frag == "" || !strings.HasSuffix(dest, ".md") {
		return "" // anchors of other files (line numbers, ...) are not checked
	}
	anchors, err := anchorsOf(dest)
	if err != nil {
		return err.Error()
	}
	if !slices.Contains(anchors, frag) {
		return fmt.Sprintf("no heading with anchor #%s in %s", frag, filepath.Base(dest))
	}
	return ""
}

var scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

func isExternal(target string) bool {
	return scheme.MatchString(target) || strings.HasPrefix(target, "//")
}

// link is one link target and the line it is on (1-based).
type link struct {
	line   int
	target string
}

var (
	fence     = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})")
	atx       = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	htmlID    = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	inline    = regexp.MustCompile(`\]\(\s*<?([^()\s<>]+)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	reference = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:[ \t]*<?([^\s>]+)>?`)
)

// parse returns the anchors of the headings of a Markdown text, as GitHub
// spells them, and its links (inline links and images, and reference
// definitions), leaving out fenced code blocks and code spans.
func parse(src string) (anchors []string, links []link) {
	lines := strings.Split(src, "\n")
	var marker string // the open fence, or ""
	for i, line := range lines {
		if marker != "" {
			if m := fence.FindStringSubmatch(line); m != nil && m[1][0] == marker[0] && len(m[1]) >= len(marker) && strings.TrimSpace(line[strings.Index(line, m[1])+len(m[1]):]) == "" {
				marker = ""
			}
			lines[i] = ""
			continue
		}
		if m := fence.FindStringSubmatch(line); m != nil {
			marker = m[1]
			lines[i] = ""
		}
	}
	text := blankCodeSpans(strings.Join(lines, "\n"))
	seen := map[string]int{}
	for _, line := range lines {
		if m := atx.FindStringSubmatch(line); m != nil {
			slug := slugify(m[1])
			if n := seen[slug]; n > 0 {
				anchors = append(anchors, fmt.Sprintf("%s-%d", slug, n))
			} else {
				anchors = append(anchors, slug)
			}
			seen[slug]++
		}
	}
	for _, m := range htmlID.FindAllStringSubmatch(text, -1) {
		anchors = append(anchors, m[1])
	}
	lineOf := func(offset int) int { return strings.Count(text[:offset], "\n") + 1 }
	for _, re := range []*regexp.Regexp{inline, reference} {
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			links = append(links, link{line: lineOf(m[0]), target: text[m[2]:m[3]]})
		}
	}
	slices.SortStableFunc(links, func(a, b link) int { return a.line - b.line })
	return anchors, links
}

// blankCodeSpans replaces every code span (a run of backticks, up to the
// next run of the same length) with spaces, keeping the newlines, so that
// what looks like a link inside code is not taken for one.
func blankCodeSpans(text string) string {
	b := []byte(text)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := 0
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		end := -1
		for j := i + n; j < len(b); {
			if b[j] != '`' {
				j++
				continue
			}
			m := 0
			for j+m < len(b) && b[j+m] == '`' {
				m++
			}
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 {
			i += n // an unmatched run is literal text
			continue
		}
		for k := i; k < end; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
		i = end
	}
	return string(b)
}

var (
	linkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	tag      = regexp.MustCompile(`<[^>]*>`)
)

// slugify spells a heading's anchor as GitHub does: the heading's text
// (links as their text, without markup), lower case, without punctuation
// other than '-' and '_', spaces turned into '-'.
func slugify(heading string) string {
	s := linkText.ReplaceAllString(heading, "$1")
	s = tag.ReplaceAllString(s, "")
	s = strings.NewReplacer("`", "", "*", "").Replace(s)
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(s)) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestParse pins the parser on the cases the project's Markdown has.
func TestParse(t *testing.T) {
	src := strings.Join([]string{
		"# lockguard",
		"## The chart, however installed",
		"### `helm test` and **Values**",
		"## Limits",
		"## Limits",
		"## Phase 2: what was chosen, and why",
		"```sh",
		"# a shell comment, not a heading",
		"see [x](not-a-link.md)",
		"```",
		"A [link](docs/a.md#x) and `[code](not-a-link.md)` and",
		"[another](#limits \"title\") across",
		"lines, ``a `[b](c)` d``.",
		"[ref]: ../e2e/README.md",
	}, "\n")
	anchors, links := parse(src)
	wantAnchors := []string{"lockguard", "the-chart-however-installed", "helm-test-and-values", "limits", "limits-1", "phase-2-what-was-chosen-and-why"}
	if !slices.Equal(anchors, wantAnchors) {
		t.Errorf("anchors: want %q, got %q", wantAnchors, anchors)
	}
	wantLinks := []link{{11, "docs/a.md#x"}, {12, "#limits"}, {14, "../e2e/README.md"}}
	if !slices.Equal(links, wantLinks) {
		t.Errorf("links: want %v, got %v", wantLinks, links)
	}
}
