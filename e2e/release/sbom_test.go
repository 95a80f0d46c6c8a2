//go:build release

package release_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/navique/lockguard/e2e/framework"
)

// cycloneDX is the part of a CycloneDX SBOM the test reads.
type cycloneDX struct {
	BOMFormat string `json:"bomFormat"`
	Metadata  struct {
		Component struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"component"`
		Properties []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"properties"`
	} `json:"metadata"`
	Components []struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"components"`
}

// TestSBOMs checks every SBOM of the release: it describes the binary the
// release ships (its sha256), as the module at the release's version, and
// lists every direct dependency of lockguard's go.mod that the binary
// links for its platform (go list -deps), at the version the module graph
// selects.
func TestSBOMs(t *testing.T) {
	r := releaseUnderTest(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "mod", "edit", "-json", filepath.Join(root, "go.mod")).Output()
	if err != nil {
		t.Fatal(err)
	}
	var mod struct {
		Module  struct{ Path string }
		Require []struct {
			Path, Version string
			Indirect      bool
		}
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	direct := map[string]string{}
	for _, req := range mod.Require {
		if !req.Indirect {
			direct[req.Path] = req.Version
		}
	}

	files, _ := filepath.Glob(r.path("*.cdx.json"))
	// lockguard on 4 platforms and in 2 images, the plugins on 5.
	if len(files) != 4+2+2*5 {
		t.Errorf("%d SBOMs: %v; want 16", len(files), files)
	}
	linked := map[string]bool{}
	depsOf := map[string]map[string]string{}
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".cdx.json")
		parts := strings.Split(base, "_") // BINARY_VERSION_OS_ARCH
		if len(parts) != 4 || parts[1] != r.version {
			t.Errorf("SBOM %s: want BINARY_%s_OS_ARCH.cdx.json", base, r.version)
			continue
		}
		bin, goos, goarch := parts[0], parts[2], parts[3]
		archive := "kubectl-lock"
		if bin == "lockguard" || bin == "lockguard-image" {
			bin, archive = "lockguard", "lockguard"
		}
		var sbom cycloneDX
		if err := json.Unmarshal(r.read(t, filepath.Base(f)), &sbom); err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		if sbom.BOMFormat != "CycloneDX" || sbom.Metadata.Component.Name != mod.Module.Path || sbom.Metadata.Component.Version != r.version {
			t.Errorf("%s: a %s SBOM of %s %s; want CycloneDX of %s %s", base, sbom.BOMFormat,
				sbom.Metadata.Component.Name, sbom.Metadata.Component.Version, mod.Module.Path, r.version)
		}
		name := bin
		if goos == "windows" {
			name += ".exe"
		}
		shipped := sha256Hex(r.archive(t, archive, goos, goarch)[name].data)
		if got := property(sbom, "cdx:gomod:binary:hash:SHA-256"); got != shipped {
			t.Errorf("%s describes a binary of sha256 %q; the release's %s for %s/%s is %s", base, got, name, goos, goarch, shipped)
		}
		listed := map[string]string{}
		for _, c := range sbom.Components {
			listed[c.Name] = c.Version
		}
		key := bin + " " + goos + "/" + goarch
		if depsOf[key] == nil {
			depsOf[key] = goListDeps(t, root, bin, goos, goarch)
		}
		deps := depsOf[key]
		var missing []string
		for path, version := range direct {
			selected, ok := deps[path]
			if !ok {
				continue
			}
			linked[path] = true
			if selected != version {
				t.Errorf("go.mod requires %s %s, the build selects %s: run go mod tidy", path, version, selected)
			}
			if listed[path] != selected {
				missing = append(missing, path+"@"+selected+" (listed: "+listed[path]+")")
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s lacks direct dependencies its binary links, or lists them at another version:\n%s", base, strings.Join(missing, "\n"))
		}
	}
	var notLinked []string
	for path := range direct {
		if !linked[path] {
			notLinked = append(notLinked, path)
		}
	}
	sort.Strings(notLinked)
	t.Logf("%d SBOMs list the %d direct dependencies the binaries link, with their versions; not linked by any binary (tests and tools only): %s",
		len(files), len(linked), strings.Join(notLinked, " "))
	if len(linked) == 0 {
		t.Error("no direct dependency is linked by any binary: the check checked nothing")
	}
}

func property(sbom cycloneDX, name string) string {
	for _, p := range sbom.Metadata.Properties {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// goListDeps returns the modules (path to version) of the packages that
// ./cmd/BIN links for goos/goarch.
func goListDeps(t *testing.T, root, bin, goos, goarch string) map[string]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}", "./cmd/"+bin)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/%s for %s/%s: %v", bin, goos, goarch, err)
	}
	deps := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, version, ok := strings.Cut(line, " "); ok {
			deps[path] = version
		}
	}
	return deps
}
