package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestCheckVersion(t *testing.T) {
	unreleased := changelogWith("[Unreleased]")
	cases := map[string]struct {
		reason, version, next, changelog, wantErr string
	}{
		"release": {
			reason:  "a release of the chart's version, its changelog entry unreleased yet",
			version: "v0.1.0", next: "0.1.0", changelog: unreleased,
		},
		"release with its entry": {
			reason:  "a release whose changelog entry is named",
			version: "v0.1.0", next: "0.1.0", changelog: changelogWith("[0.1.0] - 2026-12-03"),
		},
		"pre-release": {
			reason:  "a pre-release (a test release) may be any version",
			version: "v0.0.0-check", next: "0.1.0", changelog: unreleased,
		},
		"git describe": {
			reason:  "what make's VERSION defaulted to on an untagged clone",
			version: "0da94d4", next: "0.1.0", changelog: unreleased,
			wantErr: "VERSION=0da94d4 is not vX.Y.Z or vX.Y.Z-PRE (without VERSION, make release builds a dev release)",
		},
		"no v": {
			reason:  "the chart's spelling is not a release's",
			version: "0.1.0", next: "0.1.0", changelog: unreleased,
			wantErr: "VERSION=0.1.0 is not vX.Y.Z or vX.Y.Z-PRE (without VERSION, make release builds a dev release)",
		},
		"build metadata": {
			reason:  "'+' cannot be in the image's tag",
			version: "v0.1.0+abc", next: "0.1.0", changelog: unreleased,
			wantErr: "VERSION=v0.1.0+abc is not vX.Y.Z or vX.Y.Z-PRE (without VERSION, make release builds a dev release)",
		},
		"not the chart's": {
			reason:  "a release must package the chart at its own version",
			version: "v0.2.0", next: "0.1.0", changelog: unreleased,
			wantErr: "VERSION=v0.2.0, but the chart's version is 0.1.0: set version and appVersion in deploy/chart/lockguard/Chart.yaml to 0.2.0 first (the chart in the repository carries the next release's version)",
		},
		"another release's entry": {
			reason:  "the changelog's top entry is an earlier release",
			version: "v0.2.0", next: "0.2.0", changelog: changelogWith("[0.1.0] - 2026-01-01"),
			wantErr: "CHANGELOG.md: top entry is [0.1.0], not [0.2.0] or [Unreleased]: add the release's entry first",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := checkVersion(tc.version, tc.next, tc.changelog)
			if got := errString(err); got != tc.wantErr {
				t.Errorf("%s\ncheckVersion(%q, %q): error %q, want %q", tc.reason, tc.version, tc.next, got, tc.wantErr)
			}
		})
	}
}

func TestDevVersion(t *testing.T) {
	for _, tc := range []struct {
		commit string
		dirty  bool
		want   string
	}{
		{"0da94d4a1b2c", false, "v0.1.0-dev.g0da94d4a1b2c"},
		{"012345678901", false, "v0.1.0-dev.g012345678901"}, // all digits, a leading zero: still valid
		{"0da94d4a1b2c", true, "v0.1.0-dev.g0da94d4a1b2c.dirty"},
	} {
		got := devVersion("0.1.0", tc.commit, tc.dirty)
		if got != tc.want {
			t.Errorf("devVersion(0.1.0, %s, %v) = %s, want %s", tc.commit, tc.dirty, got, tc.want)
		}
		if err := checkVersion(got, "0.1.0", changelogWith("[Unreleased]")); err != nil {
			t.Errorf("the dev version %s cannot be released: %v", got, err)
		}
	}
}

func TestChartVersion(t *testing.T) {
	cases := map[string]struct {
		chart, want, wantErr string
	}{
		"agree":       {chart: "apiVersion: v2\nversion: 0.1.0\nappVersion: \"0.1.0\"\n", want: "0.1.0"},
		"disagree":    {chart: "version: 0.2.0\nappVersion: \"0.1.0\"\n", wantErr: `appVersion "0.1.0" is not the version "0.2.0": both name the next release`},
		"nested keys": {chart: "version: 0.1.0\nappVersion: 0.1.0\ndependencies:\n  - version: 9.9.9\n", want: "0.1.0"},
		"none":        {chart: "apiVersion: v2\n", wantErr: "no version"},
		"not semver":  {chart: "version: 1.0\nappVersion: 1.0\n", wantErr: `version "1.0" is not X.Y.Z`},
	}
	for name, tc := range cases {
		got, err := chartVersion(tc.chart)
		if got != tc.want || errString(err) != tc.wantErr {
			t.Errorf("%s: chartVersion: %q, %q; want %q, %q", name, got, errString(err), tc.want, tc.wantErr)
		}
	}
}

// TestRepositoryVersions checks the repository's own chart: its version and
// appVersion agree, a release of that version can be made (the changelog
// has its entry or [Unreleased] on top), and Artifact Hub's list of images
// names the same tag, so that the chart in the repository and the next
// release's chart are one version.
func TestRepositoryVersions(t *testing.T) {
	root := filepath.Join("..", "..")
	chartText, err := os.ReadFile(filepath.Join(root, "deploy", "chart", "lockguard", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	next, err := chartVersion(string(chartText))
	if err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	text, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkVersion("v"+next, next, string(text)); err != nil {
		t.Errorf("the chart's version %s cannot be released: %v", next, err)
	}
	image := regexp.MustCompile(`(?m)^\s+image: \S+:(\S+)$`).FindStringSubmatch(string(chartText))
	if image == nil || image[1] != next {
		t.Errorf("Chart.yaml's artifacthub.io/images names %q; want the tag %s", image, next)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// changelogWith is a changelog whose top entry is headed top, above the
// entry of release 0.1.0.
func changelogWith(top string) string {
	return "# Changelog\n\n## " + top + "\n\n### Added\n\n- A thing.\n\n## [0.1.0] - 2026-01-01\n\n- Old.\n"
}
