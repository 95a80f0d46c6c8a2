package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWriteArchive(t *testing.T) {
	files := []file{{name: "kubectl-lock", mode: 0o755, data: []byte("binary")}, {name: "README", mode: 0o644, data: []byte("text")}}
	mtime := time.Unix(1700000000, 0).UTC()
	for _, name := range []string{"a.tar.gz", "a.zip"} {
		t.Run(name, func(t *testing.T) {
			first, err := writeArchive(name, files, mtime)
			if err != nil {
				t.Fatal(err)
			}
			// Another moment, the same bytes.
			time.Sleep(1100 * time.Millisecond)
			second, err := writeArchive(name, files, mtime)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first, second) {
				t.Errorf("writeArchive(%s) twice: different bytes", name)
			}
			type got struct {
				Name  string
				Mode  int64
				Data  string
				MTime int64
			}
			var entries []got
			if strings.HasSuffix(name, ".zip") {
				zr, err := zip.NewReader(bytes.NewReader(first), int64(len(first)))
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range zr.File {
					rc, _ := f.Open()
					b, _ := io.ReadAll(rc)
					entries = append(entries, got{f.Name, int64(f.Mode().Perm()), string(b), f.Modified.Unix()})
				}
			} else {
				zr, err := gzip.NewReader(bytes.NewReader(first))
				if err != nil {
					t.Fatal(err)
				}
				if !zr.ModTime.IsZero() || zr.Name != "" {
					t.Errorf("gzip header has time %v, name %q; want none", zr.ModTime, zr.Name)
				}
				tr := tar.NewReader(zr)
				for {
					h, err := tr.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
						t.Errorf("%s is owned by %d:%d (%q:%q); want 0:0 without names", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
					}
					b, _ := io.ReadAll(tr)
					entries = append(entries, got{h.Name, h.Mode, string(b), h.ModTime.Unix()})
				}
			}
			want := []got{{"kubectl-lock", 0o755, "binary", 1700000000}, {"README", 0o644, "text", 1700000000}}
			if diff := cmp.Diff(want, entries); diff != "" {
				t.Errorf("writeArchive(%s): -want, +got:\n%s", name, diff)
			}
		})
	}
}

func TestTopEntry(t *testing.T) {
	changelog := func(top string) string {
		return "# Changelog\n\nAll notable changes.\n\n## " + top + "\n\n### Added\n\n- A thing.\n\n## [0.1.0] - 2026-01-01\n\n- Old.\n\n[0.1.0]: https://example/0.1.0\n"
	}
	cases := map[string]struct {
		reason  string
		text    string
		version string
		want    changelogEntry
		wantErr string
	}{
		"unreleased": {
			reason: "a release may take the Unreleased entry",
			text:   changelog("[Unreleased]"), version: "v0.2.0",
			want: changelogEntry{heading: "[Unreleased]", body: "### Added\n\n- A thing."},
		},
		"own entry": {
			reason: "a release takes its own entry",
			text:   changelog("[0.2.0] - 2026-02-01"), version: "v0.2.0",
			want: changelogEntry{heading: "[0.2.0] - 2026-02-01", body: "### Added\n\n- A thing."},
		},
		"stale": {
			reason: "a release whose entry was not written yet fails",
			text:   changelog("[0.1.0] - 2026-01-01"), version: "v0.2.0",
			wantErr: "top entry is [0.1.0], not [0.2.0] or [Unreleased]",
		},
		"pre-release": {
			reason: "a pre-release takes whatever is on top",
			text:   changelog("[0.1.0] - 2026-01-01"), version: "v0.2.0-rc.1",
			want: changelogEntry{heading: "[0.1.0] - 2026-01-01", body: "### Added\n\n- A thing."},
		},
		"last entry": {
			reason: "link references after the only entry are not part of it",
			text:   "# Changelog\n\n## [Unreleased]\n\n- One.\n\n[Unreleased]: https://example\n", version: "v1.0.0",
			want: changelogEntry{heading: "[Unreleased]", body: "- One."},
		},
		"no entry": {
			reason: "a changelog without entries fails",
			text:   "# Changelog\n", version: "v1.0.0",
			wantErr: "no entry",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := topEntry(tc.text, tc.version)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\ntopEntry(...): error %v; want %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\ntopEntry(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(changelogEntry{})); diff != "" {
				t.Errorf("%s\ntopEntry(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestUsersAsDockerfile checks that the image written here and the
// Dockerfile's give 65532 the same name: the Dockerfile's printf of
// /etc/passwd and /etc/group is etcPasswd and etcGroup.
func TestUsersAsDockerfile(t *testing.T) {
	dockerfile, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	printf := regexp.MustCompile(`printf '([^']*)' >/out/etc/(passwd|group)`)
	got := map[string]string{}
	for _, m := range printf.FindAllStringSubmatch(string(dockerfile), -1) {
		got[m[2]] = strings.ReplaceAll(m[1], `\n`, "\n")
	}
	want := map[string]string{"passwd": etcPasswd, "group": etcGroup}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the Dockerfile's users and groups: -want (hack/release), +got (Dockerfile):\n%s", diff)
	}
}

func TestBuildImageIsReproducible(t *testing.T) {
	created := time.Unix(1700000000, 0).UTC()
	a, err := buildImage("arm64", []byte("binary"), "v1.2.3", created)
	if err != nil {
		t.Fatal(err)
	}
	b, err := buildImage("arm64", []byte("binary"), "v1.2.3", created)
	if err != nil {
		t.Fatal(err)
	}
	if a.manifest.digest() != b.manifest.digest() {
		t.Errorf("buildImage twice: manifests %s and %s", a.manifest.digest(), b.manifest.digest())
	}
	if !strings.Contains(string(a.config.data), `"User":"65532:65532"`) || !strings.Contains(string(a.config.data), `"Entrypoint":["/lockguard"]`) {
		t.Errorf("config %s: want user 65532:65532 and entrypoint /lockguard", a.config.data)
	}
}

func TestRetime(t *testing.T) {
	// A chart as helm package writes it: the time of packaging on every
	// entry, an owner, a gzip comment.
	pack := func(now time.Time) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Header.Comment = "Helm"
		zw.Header.ModTime = now
		tw := tar.NewWriter(zw)
		for _, f := range []struct{ name, data string }{{"lockguard/Chart.yaml", "name: lockguard\n"}, {"lockguard/templates/deployment.yaml", "kind: Deployment\n"}} {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: now, AccessTime: now, Uname: "builder", Uid: 1000}); err != nil {
				t.Fatal(err)
			}
			tw.Write([]byte(f.data))
		}
		tw.Close()
		zw.Close()
		return buf.Bytes()
	}
	mtime := time.Unix(1700000000, 0).UTC()
	first, err := retime(pack(time.Unix(1800000000, 0)), mtime)
	if err != nil {
		t.Fatal(err)
	}
	second, err := retime(pack(time.Unix(1800000042, 0)), mtime)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Fatal("retime of two packagings at different times: different bytes")
	}
	zr, err := gzip.NewReader(bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Comment != "Helm" {
		t.Errorf("gzip header: time %v, comment %q; want none and Helm", zr.ModTime, zr.Comment)
	}
	type entry struct {
		Name  string
		Mode  int64
		Data  string
		MTime int64
		Owner string
	}
	var got []entry
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got = append(got, entry{h.Name, h.Mode, string(b), h.ModTime.Unix(), h.Uname})
	}
	want := []entry{
		{"lockguard/Chart.yaml", 0o644, "name: lockguard\n", mtime.Unix(), ""},
		{"lockguard/templates/deployment.yaml", 0o644, "kind: Deployment\n", mtime.Unix(), ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("retime: entries -want +got:\n%s", diff)
	}

	// Not a tar.gz, or a link in it: an error, and nothing written.
	if _, err := retime([]byte("not gzip"), mtime); err == nil {
		t.Error("retime of bytes that are not gzip: no error")
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "lockguard/x", Linkname: "/etc/passwd"})
	tw.Close()
	zw.Close()
	if _, err := retime(buf.Bytes(), mtime); err == nil || !strings.Contains(err.Error(), "files and directories only") {
		t.Errorf("retime of a symlink entry: %v; want an error naming files and directories only", err)
	}
}
