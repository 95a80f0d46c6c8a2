package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// notesCmd writes the release notes: the top entry of the changelog, then
// the commits since the last tag.
func notesCmd(args []string) error {
	fs := flags("notes")
	version := fs.String("version", "", "the release, vX.Y.Z")
	changelog := fs.String("changelog", "CHANGELOG.md", "the changelog (Keep a Changelog)")
	image := fs.String("image", "", "the image's repository (the chart's image.repository), e.g. ghcr.io/navique/lockguard")
	readme := fs.String("readme", "README.md", "the README, whose install commands the notes repeat")
	out := fs.String("o", "", "the notes to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" || *image == "" || *out == "" {
		return errors.New("notes: want -version, -image and -o")
	}
	text, err := os.ReadFile(*changelog)
	if err != nil {
		return err
	}
	readmeText, err := os.ReadFile(*readme)
	if err != nil {
		return err
	}
	var install installCommands
	if install.chart, err = readmeBlock(string(readmeText), "chart"); err != nil {
		return fmt.Errorf("%s: %w", *readme, err)
	}
	if install.krew, err = readmeBlock(string(readmeText), "krew"); err != nil {
		return fmt.Errorf("%s: %w", *readme, err)
	}
	entry, err := topEntry(string(text), *version)
	if err != nil {
		return fmt.Errorf("%s: %w", *changelog, err)
	}
	since, err := lastTag(*version)
	if err != nil {
		return err
	}
	rangeArg := "HEAD"
	if since != "" {
		rangeArg = since + "..HEAD"
	}
	log, err := git("log", "--no-merges", "--format=- %h %s", rangeArg)
	if err != nil {
		return err
	}
	return os.WriteFile(*out, []byte(notes(*version, *image, entry, install, since, log)), 0o644)
}

// installCommands are the README's install commands (its blocks chart and
// krew), which the notes repeat as they stand: one install story.
type installCommands struct {
	chart, krew string
}

// notes returns the release notes of the image repository image from the
// changelog's entry, the README's install commands and git log's lines of
// the commits since the tag since ("" when there is none).
func notes(version, image string, entry changelogEntry, install installCommands, since, log string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# lockguard %s\n\n", version)
	if strings.Contains(version, "-dev.") {
		b.WriteString("A dev release, built by `make release` from a commit: not a published release.\n\n")
	}
	fmt.Fprintf(&b, "## Changes\n\nFrom CHANGELOG.md (%s):\n\n%s\n\n", entry.heading, entry.body)
	fmt.Fprintf(&b, "## Install\n\n"+
		"As the README says, in the directory of this release's files (check them first with `sha256sum -c SHA256SUMS`), with\n\n"+
		"```sh\nexport VERSION=%[2]s OS=linux ARCH=amd64   # this release; your platform: OS linux or darwin, ARCH amd64 or arm64\n```\n\n"+
		"The image `%[3]s:%[1]s` is in the release, not in a registry: `kind load image-archive lockguard-image_%[2]s_linux_amd64.tar`"+
		" or `docker load -i lockguard-image_%[2]s_linux_amd64.tar`; `lockguard-image_%[2]s.oci.tar` holds amd64 and arm64 behind one index,"+
		" to copy into your registry (then add `--set image.repository=REGISTRY/lockguard` to `helm install`).\n\n"+
		"The chart, `lockguard-%[1]s.tgz` (without Helm: `kubectl apply --server-side -f lockguard.yaml`):\n\n"+
		"```sh\n%[4]s```\n\n"+
		"The kubectl plugins, with krew (or put `kubectl-lock` and `kubectl-unlock` from the archive on your `PATH`):\n\n"+
		"```sh\n%[5]s```\n\n"+
		"Each binary and image has a CycloneDX SBOM (`*.cdx.json`).\n\n",
		strings.TrimPrefix(version, "v"), version, image, install.chart, install.krew)
	commits := strings.Count(log, "\n")
	if since == "" {
		fmt.Fprintf(&b, "## Commits (%d; no earlier release)\n\n", commits)
	} else {
		fmt.Fprintf(&b, "## Commits since %s (%d)\n\n", since, commits)
	}
	b.WriteString(log)
	return b.String()
}

// changelogEntry is one "## " section of a Keep a Changelog file.
type changelogEntry struct {
	heading string // e.g. "[Unreleased]" or "[0.2.0] - 2027-01-15"
	body    string
}

var (
	entryVersion = regexp.MustCompile(`^\[([^\]]+)\]`)
	linkRef      = regexp.MustCompile(`^\[[^\]]+\]: `)
)

// topEntry returns the changelog's first "## " section. For a release
// (vX.Y.Z) it must be the release's own entry or [Unreleased]; a
// pre-release (vX.Y.Z-rc.1) takes whatever is on top.
func topEntry(text, version string) (changelogEntry, error) {
	var e changelogEntry
	var body []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "## ") {
			if e.heading != "" {
				break
			}
			e.heading = strings.TrimSpace(strings.TrimPrefix(line, "## "))
			continue
		}
		// Link reference definitions close the file ("[0.1.0]: https://...").
		if e.heading != "" && linkRef.MatchString(line) {
			break
		}
		if e.heading != "" {
			body = append(body, line)
		}
	}
	if e.heading == "" {
		return e, errors.New("no entry (a line starting with \"## \")")
	}
	e.body = strings.TrimSpace(strings.Join(body, "\n"))
	m := entryVersion.FindStringSubmatch(e.heading)
	if m == nil {
		return e, fmt.Errorf("top entry %q: want \"## [Unreleased]\" or \"## [X.Y.Z] - DATE\"", e.heading)
	}
	release := strings.TrimPrefix(version, "v")
	if strings.Contains(release, "-") || m[1] == "Unreleased" || m[1] == release {
		return e, nil
	}
	return e, fmt.Errorf("top entry is %s, not [%s] or [Unreleased]: add the release's entry first", m[0], release)
}

// lastTag returns the newest tag v* reachable from HEAD other than version
// itself, or "" when there is none.
func lastTag(version string) (string, error) {
	tag, err := git("describe", "--tags", "--abbrev=0", "--match", "v*", "--exclude", version, "HEAD")
	if err != nil {
		if strings.Contains(err.Error(), "No names found") || strings.Contains(err.Error(), "cannot describe") {
			return "", nil
		}
		return "", err
	}
	return strings.TrimSpace(tag), nil
}

func git(args ...string) (string, error) {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", err
	}
	return string(out), nil
}
