//go:build release

package release_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/navique/lockguard/e2e/framework"
)

// release is the release directory under test.
type release struct {
	dist    string
	version string // vX.Y.Z
	chart   string // X.Y.Z: the chart's version and appVersion, the image's tag
	repo    string // the image's repository, from the chart's values
}

func releaseUnderTest(t *testing.T) release {
	t.Helper()
	r := release{dist: os.Getenv("LOCKGUARD_RELEASE_DIST"), version: os.Getenv("LOCKGUARD_RELEASE_VERSION")}
	if r.dist == "" || r.version == "" {
		t.Fatal("set LOCKGUARD_RELEASE_DIST and LOCKGUARD_RELEASE_VERSION (make release-check does)")
	}
	r.chart = strings.TrimPrefix(r.version, "v")
	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
	}
	chart := r.chartFiles(t)
	if err := yaml.Unmarshal(chart["lockguard/values.yaml"].data, &values); err != nil {
		t.Fatal(err)
	}
	if values.Image.Tag != "" {
		t.Fatalf("the packaged chart's image.tag is %q; want empty (the appVersion)", values.Image.Tag)
	}
	r.repo = values.Image.Repository
	return r
}

func (r release) path(name string) string { return filepath.Join(r.dist, name) }

func (r release) read(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(r.path(name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// chartFiles returns the files of the packaged chart.
func (r release) chartFiles(t *testing.T) map[string]entry {
	t.Helper()
	return untar(t, r.read(t, "lockguard-"+r.chart+".tgz"), true)
}

// archive returns the files of a binary archive: NAME_VERSION_OS_ARCH.
func (r release) archive(t *testing.T, name, goos, goarch string) map[string]entry {
	t.Helper()
	base := name + "_" + r.version + "_" + goos + "_" + goarch
	if goos == "windows" {
		return unzip(t, r.read(t, base+".zip"))
	}
	return untar(t, r.read(t, base+".tar.gz"), true)
}

// entry is a file of an archive.
type entry struct {
	data []byte
	hdr  *tar.Header // nil in a zip
}

func untar(t *testing.T, data []byte, gz bool) map[string]entry {
	t.Helper()
	var rd io.Reader = bytes.NewReader(data)
	if gz {
		zr, err := gzip.NewReader(rd)
		if err != nil {
			t.Fatal(err)
		}
		rd = zr
	}
	files := map[string]entry{}
	tr := tar.NewReader(rd)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = entry{data: b, hdr: h}
	}
}

func unzip(t *testing.T, data []byte) map[string]entry {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]entry{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		files[f.Name] = entry{data: b}
	}
	return files
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// platforms of the binaries: lockguard on all but windows.
var platforms = []struct{ os, arch string }{
	{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"},
}

// TestVersionsAgree checks that every place the release names its version
// names the same one: the binaries (--version on this platform, the
// stamped string on the others), the chart's version, appVersion and
// Artifact Hub image, the rendered manifest's image, the krew manifests,
// the release notes and the image's name and labels.
func TestVersionsAgree(t *testing.T) {
	r := releaseUnderTest(t)
	image := r.repo + ":" + r.chart
	for _, p := range platforms {
		var bins []string
		if p.os != "windows" {
			bins = append(bins, "lockguard")
		}
		bins = append(bins, "kubectl-lock", "kubectl-unlock")
		for _, bin := range bins {
			archive := "kubectl-lock"
			if bin == "lockguard" {
				archive = "lockguard"
			}
			files := r.archive(t, archive, p.os, p.arch)
			name := bin
			if p.os == "windows" {
				name += ".exe"
			}
			f, ok := files[name]
			if !ok {
				t.Errorf("%s archive for %s/%s has no %s", archive, p.os, p.arch, name)
				continue
			}
			if !bytes.Contains(f.data, []byte(r.version)) {
				t.Errorf("%s for %s/%s does not hold the version %s", name, p.os, p.arch, r.version)
			}
			if p.os != runtime.GOOS || p.arch != runtime.GOARCH {
				continue
			}
			path := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(path, f.data, 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(path, "--version").CombinedOutput()
			if got, want := strings.TrimSpace(string(out)), bin+" "+r.version; err != nil || got != want {
				t.Errorf("%s --version: %q, %v; want %q", bin, got, err, want)
			}
		}
	}

	var chart struct {
		Version     string            `json:"version"`
		AppVersion  string            `json:"appVersion"`
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(r.chartFiles(t)["lockguard/Chart.yaml"].data, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != r.chart || chart.AppVersion != r.chart {
		t.Errorf("the packaged chart has version %q, appVersion %q; want %q for both", chart.Version, chart.AppVersion, r.chart)
	}
	if got := chart.Annotations["artifacthub.io/images"]; !strings.Contains(got, "image: "+image+"\n") {
		t.Errorf("the packaged chart's artifacthub.io/images is %q; want image %s", got, image)
	}

	objs, err := framework.Decode(r.read(t, "lockguard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d := framework.Find(objs, "Deployment", "lockguard")
	if d == nil {
		t.Fatal("lockguard.yaml has no Deployment lockguard")
	}
	containers, _, _ := unstructuredSlice(d.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 || containers[0].(map[string]any)["image"] != image {
		t.Errorf("lockguard.yaml's Deployment runs %v; want image %s", containers, image)
	}

	for _, plugin := range []string{"lock", "unlock"} {
		var m krewManifest
		if err := yaml.Unmarshal(r.read(t, plugin+".yaml"), &m); err != nil {
			t.Fatal(err)
		}
		if m.Metadata.Name != plugin || m.Spec.Version != r.version {
			t.Errorf("%s.yaml: plugin %q version %q; want %q, %q", plugin, m.Metadata.Name, m.Spec.Version, plugin, r.version)
		}
		if len(m.Spec.Platforms) != len(platforms) {
			t.Errorf("%s.yaml has %d platforms; want %d", plugin, len(m.Spec.Platforms), len(platforms))
		}
		for _, p := range m.Spec.Platforms {
			name := filepath.Base(p.URI)
			if want := "https://github.com/navique/lockguard/releases/download/" + r.version + "/" + name; p.URI != want {
				t.Errorf("%s.yaml: uri %s; want %s", plugin, p.URI, want)
			}
			if got := sha256Hex(r.read(t, name)); got != p.SHA256 {
				t.Errorf("%s.yaml: %s has sha256 %s; the manifest says %s", plugin, name, got, p.SHA256)
			}
			if want := "_" + p.Selector.MatchLabels["os"] + "_" + p.Selector.MatchLabels["arch"] + "."; !strings.Contains(name, want) {
				t.Errorf("%s.yaml: the platform %v downloads %s", plugin, p.Selector.MatchLabels, name)
			}
		}
	}

	notes := string(r.read(t, "RELEASE_NOTES.md"))
	for _, want := range []string{"# lockguard " + r.version + "\n", "lockguard-" + r.chart + ".tgz", "image `" + image + "`", "lockguard-image_" + r.version + "_linux_amd64.tar"} {
		if !strings.Contains(notes, want) {
			t.Errorf("RELEASE_NOTES.md does not name %q", want)
		}
	}
}

type krewManifest struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version   string `json:"version"`
		Platforms []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// unstructuredSlice returns the slice at fields of obj.
func unstructuredSlice(obj map[string]any, fields ...string) ([]any, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[f]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}
