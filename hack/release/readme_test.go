package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadmeBlock(t *testing.T) {
	readme := "# x\n\n<!-- release-check: chart -->\n```sh\nhelm install a\nkubectl b\n```\n\n<!-- release-check: empty -->\n```sh\n```\n" +
		"<!-- release-check: prose -->\ntext\n```sh\nx\n```\n<!-- release-check: open -->\n```sh\nx\n"
	cases := map[string]struct{ want, wantErr string }{
		"chart": {want: "helm install a\nkubectl b\n"},
		"empty": {wantErr: "the block after <!-- release-check: empty --> is empty"},
		"prose": {wantErr: "<!-- release-check: prose --> is not followed by a fenced code block"},
		"open":  {wantErr: "the block after <!-- release-check: open --> is not closed"},
		"krew":  {wantErr: "no line <!-- release-check: krew -->"},
	}
	for name, tc := range cases {
		got, err := readmeBlock(readme, name)
		if got != tc.want || errString(err) != tc.wantErr {
			t.Errorf("readmeBlock(%s): %q, %q; want %q, %q", name, got, errString(err), tc.want, tc.wantErr)
		}
	}
}

// TestReadmeInstall checks the repository's README: its install commands
// are where make release-check and the release notes take them from, the
// plugins install from the release's own archive (--archive: there is no
// download page for a dev release), and the chart goes into the labelled
// namespace, as docs/install.md says too.
func TestReadmeInstall(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	install, err := os.ReadFile(filepath.Join("..", "..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"chart": {"kubectl create namespace lockguard-system\n", "kubectl label namespace lockguard-system pod-security.kubernetes.io/enforce=restricted\n", "helm install lockguard lockguard-${VERSION#v}.tgz --namespace lockguard-system\n"},
		"krew":  {"kubectl krew install --manifest=lock.yaml --archive=kubectl-lock_${VERSION}_${OS}_${ARCH}.tar.gz\n", "kubectl krew install --manifest=unlock.yaml --archive=kubectl-lock_${VERSION}_${OS}_${ARCH}.tar.gz\n"},
	}
	for name, lines := range want {
		block, err := readmeBlock(string(readme), name)
		if err != nil {
			t.Fatalf("README.md: %v", err)
		}
		for _, line := range lines {
			if !strings.Contains(block, line) {
				t.Errorf("README.md's %s commands lack %q:\n%s", name, line, block)
			}
			if !strings.Contains(string(install), line) {
				t.Errorf("docs/install.md lacks the README's %s command %q", name, line)
			}
		}
	}
}

func TestNotesRepeatReadme(t *testing.T) {
	install := installCommands{chart: "helm install lockguard lockguard-${VERSION#v}.tgz\n", krew: "kubectl krew install --manifest=lock.yaml --archive=x\n"}
	got := notes("v0.1.0-dev.gabc", "ghcr.io/navique/lockguard", changelogEntry{heading: "[Unreleased]", body: "- A thing."}, install, "", "- abc A commit.\n")
	for _, want := range []string{
		"# lockguard v0.1.0-dev.gabc\n\nA dev release, built by `make release` from a commit: not a published release.\n",
		"export VERSION=v0.1.0-dev.gabc OS=linux ARCH=amd64",
		"```sh\nhelm install lockguard lockguard-${VERSION#v}.tgz\n```\n",
		"```sh\nkubectl krew install --manifest=lock.yaml --archive=x\n```\n",
		"The image `ghcr.io/navique/lockguard:0.1.0-dev.gabc`",
		"## Commits (1; no earlier release)\n\n- abc A commit.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("notes lack %q:\n%s", want, got)
		}
	}
	if got := notes("v0.1.0", "r", changelogEntry{}, install, "", ""); strings.Contains(got, "dev release") {
		t.Errorf("the notes of a release call it a dev release:\n%s", got)
	}
}
