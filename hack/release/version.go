package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// semver is a release's version: vX.Y.Z, or vX.Y.Z-PRE for a pre-release
// (a dev release, a test release). No build metadata (+...): the version
// is also the image's tag, where '+' is not allowed.
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// versionCmd prints the version of the release to build, and fails at
// once, before anything is built, when it cannot be released: with
// -version, that version (vX.Y.Z must be the chart's version and have its
// changelog entry); without, a dev release of the commit.
func versionCmd(args []string) error {
	fs := flags("version")
	version := fs.String("version", "", "the release, vX.Y.Z or vX.Y.Z-PRE; empty: a dev release")
	chart := fs.String("chart", "deploy/chart/lockguard/Chart.yaml", "the chart's Chart.yaml")
	changelog := fs.String("changelog", "CHANGELOG.md", "the changelog (Keep a Changelog)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	chartText, err := os.ReadFile(*chart)
	if err != nil {
		return err
	}
	next, err := chartVersion(string(chartText))
	if err != nil {
		return fmt.Errorf("%s: %w", *chart, err)
	}
	if *version == "" {
		commit, err := git("rev-parse", "--short=12", "HEAD")
		if err != nil {
			return err
		}
		changes, err := git("status", "--porcelain", "--untracked-files=no")
		if err != nil {
			return err
		}
		v := devVersion(next, strings.TrimSpace(commit), changes != "")
		fmt.Fprintf(os.Stderr, "release: no VERSION given: a dev release, %s (the chart's version %s, the next release, and the commit); make release VERSION=vX.Y.Z builds a release\n", v, next)
		fmt.Println(v)
		return nil
	}
	text, err := os.ReadFile(*changelog)
	if err != nil {
		return err
	}
	if err := checkVersion(*version, next, string(text)); err != nil {
		return err
	}
	fmt.Println(*version)
	return nil
}

// devVersion is the version of a dev release of commit: a pre-release of
// next, the chart's version. The commit is prefixed with g (as git
// describe does), so that an all-digit hash is not a numeric identifier.
func devVersion(next, commit string, dirty bool) string {
	v := "v" + next + "-dev.g" + commit
	if dirty {
		v += ".dirty"
	}
	return v
}

// checkVersion says why version cannot be released from a repository
// whose chart has version next and whose changelog is changelog, or
// returns nil. A release vX.Y.Z must be the chart's version, so that the
// packaged chart and the repository's agree, and have its changelog entry
// on top (or [Unreleased]); a pre-release may be any version.
func checkVersion(version, next, changelog string) error {
	if !semver.MatchString(version) {
		return fmt.Errorf("VERSION=%s is not vX.Y.Z or vX.Y.Z-PRE (without VERSION, make release builds a dev release)", version)
	}
	if strings.Contains(version, "-") {
		return nil
	}
	if release := strings.TrimPrefix(version, "v"); release != next {
		return fmt.Errorf("VERSION=%s, but the chart's version is %s: set version and appVersion in deploy/chart/lockguard/Chart.yaml to %s first (the chart in the repository carries the next release's version)", version, next, release)
	}
	if _, err := topEntry(changelog, version); err != nil {
		return fmt.Errorf("CHANGELOG.md: %w", err)
	}
	return nil
}

// chartVersion returns the version of a Chart.yaml, which must equal its
// appVersion: the repository's chart names the next release, whose
// version make release stamps into both.
func chartVersion(chartYAML string) (string, error) {
	fields := map[string]string{}
	for _, line := range strings.Split(chartYAML, "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok || (key != "version" && key != "appVersion") {
			continue // top-level keys only: no indentation
		}
		fields[key] = strings.Trim(strings.TrimSpace(value), `"'`)
	}
	version, app := fields["version"], fields["appVersion"]
	switch {
	case version == "":
		return "", errors.New("no version")
	case !semver.MatchString("v" + version):
		return "", fmt.Errorf("version %q is not X.Y.Z", version)
	case app != version:
		return "", fmt.Errorf("appVersion %q is not the version %q: both name the next release", app, version)
	}
	return version, nil
}
