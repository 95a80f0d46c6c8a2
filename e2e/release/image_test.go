//go:build release

package release_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform"`
	Annotations map[string]string `json:"annotations"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

// layout is an OCI image layout read from a tar.
type layout struct {
	t     *testing.T
	name  string
	files map[string]entry
}

// blob returns the blob of d, checking its digest and size.
func (l layout) blob(d descriptor) []byte {
	l.t.Helper()
	f, ok := l.files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok {
		l.t.Fatalf("%s: no blob %s", l.name, d.Digest)
	}
	if got := "sha256:" + sha256Hex(f.data); got != d.Digest || int64(len(f.data)) != d.Size {
		l.t.Fatalf("%s: blob %s has digest %s and %d bytes; the descriptor says %d", l.name, d.Digest, got, len(f.data), d.Size)
	}
	return f.data
}

func (l layout) json(d descriptor, v any) {
	l.t.Helper()
	if err := json.Unmarshal(l.blob(d), v); err != nil {
		l.t.Fatalf("%s: %s: %v", l.name, d.Digest, err)
	}
}

func (l layout) index() index {
	l.t.Helper()
	if got := string(l.files["oci-layout"].data); got != `{"imageLayoutVersion":"1.0.0"}` {
		l.t.Errorf("%s: oci-layout is %q", l.name, got)
	}
	var idx index
	if err := json.Unmarshal(l.files["index.json"].data, &idx); err != nil {
		l.t.Fatalf("%s: index.json: %v", l.name, err)
	}
	if len(idx.Manifests) != 1 {
		l.t.Fatalf("%s: index.json has %d manifests; want 1", l.name, len(idx.Manifests))
	}
	return idx
}

// TestImages checks the image archives: per architecture, an OCI layout
// naming the image as the chart does (repository:appVersion), with docker's
// manifest.json, whose one image runs /lockguard as 65532:65532 and holds
// exactly the release's linux binary and the user database; and the
// multi-architecture archive, whose image index lists the same two images.
func TestImages(t *testing.T) {
	r := releaseUnderTest(t)
	ref := r.repo + ":" + r.chart
	manifests := map[string]descriptor{}
	for _, arch := range []string{"amd64", "arm64"} {
		name := "lockguard-image_" + r.version + "_linux_" + arch + ".tar"
		l := layout{t: t, name: name, files: untar(t, r.read(t, name), false)}
		d := l.index().Manifests[0]
		wantAnnotations := map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": r.chart}
		if diff := cmp.Diff(wantAnnotations, d.Annotations); diff != "" {
			t.Errorf("%s: index.json's annotations: -want, +got:\n%s", name, diff)
		}
		img := checkImage(t, l, d, arch)
		manifests[arch] = d

		bin := r.archive(t, "lockguard", "linux", arch)["lockguard"].data
		if !bytes.Equal(img["lockguard"].data, bin) {
			t.Errorf("%s: /lockguard is not the binary of lockguard_%s_linux_%s.tar.gz", name, r.version, arch)
		}

		var docker []struct {
			Config   string
			RepoTags []string
			Layers   []string
		}
		if err := json.Unmarshal(l.files["manifest.json"].data, &docker); err != nil {
			t.Fatalf("%s: manifest.json: %v", name, err)
		}
		if len(docker) != 1 || !slices.Equal(docker[0].RepoTags, []string{ref}) {
			t.Fatalf("%s: manifest.json is %+v; want one image tagged %s", name, docker, ref)
		}
		for _, p := range append([]string{docker[0].Config}, docker[0].Layers...) {
			if _, ok := l.files[p]; !ok {
				t.Errorf("%s: manifest.json names %s, which it does not hold", name, p)
			}
		}
	}

	name := "lockguard-image_" + r.version + ".oci.tar"
	l := layout{t: t, name: name, files: untar(t, r.read(t, name), false)}
	top := l.index().Manifests[0]
	if top.MediaType != "application/vnd.oci.image.index.v1+json" || top.Annotations["io.containerd.image.name"] != ref {
		t.Fatalf("%s: index.json points at %+v; want an image index named %s", name, top, ref)
	}
	var multi index
	l.json(top, &multi)
	if len(multi.Manifests) != 2 {
		t.Fatalf("%s: the image index lists %d images; want 2", name, len(multi.Manifests))
	}
	for _, d := range multi.Manifests {
		arch := d.Platform.Architecture
		want := manifests[arch]
		want.Annotations = nil
		if diff := cmp.Diff(want, d); diff != "" {
			t.Errorf("%s: the image index's %s entry: -want (the per-architecture archive's), +got:\n%s", name, arch, diff)
		}
		checkImage(t, l, d, arch)
	}
}

// checkImage checks the image of the manifest d and returns the files of
// its one layer.
func checkImage(t *testing.T, l layout, d descriptor, arch string) map[string]entry {
	t.Helper()
	wantPlatform := &platform{Architecture: arch, OS: "linux"}
	if arch == "arm64" {
		wantPlatform.Variant = "v8"
	}
	if diff := cmp.Diff(wantPlatform, d.Platform); diff != "" {
		t.Errorf("%s: the manifest's platform: -want, +got:\n%s", l.name, diff)
	}
	var m struct {
		Config descriptor   `json:"config"`
		Layers []descriptor `json:"layers"`
	}
	l.json(d, &m)
	var config struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
		Config       struct {
			User       string
			Entrypoint []string
		} `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	l.json(m.Config, &config)
	if config.Architecture != arch || config.OS != "linux" || config.Config.User != "65532:65532" ||
		!slices.Equal(config.Config.Entrypoint, []string{"/lockguard"}) {
		t.Errorf("%s: the %s image's config is %+v; want linux/%s, user 65532:65532, entrypoint [/lockguard]", l.name, arch, config, arch)
	}
	if len(m.Layers) != 1 || len(config.RootFS.DiffIDs) != 1 {
		t.Fatalf("%s: %d layers, %d diff_ids; want 1", l.name, len(m.Layers), len(config.RootFS.DiffIDs))
	}
	zr, err := gzip.NewReader(bytes.NewReader(l.blob(m.Layers[0])))
	if err != nil {
		t.Fatal(err)
	}
	layer, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if got := "sha256:" + sha256Hex(layer); got != config.RootFS.DiffIDs[0] {
		t.Errorf("%s: the layer's diff_id is %s; the config says %s", l.name, got, config.RootFS.DiffIDs[0])
	}
	files := untar(t, layer, false)
	var names []string
	for n, f := range files {
		names = append(names, n)
		if f.hdr.Uid != 0 || f.hdr.Gid != 0 {
			t.Errorf("%s: %s is owned by %d:%d; want 0:0", l.name, n, f.hdr.Uid, f.hdr.Gid)
		}
	}
	sort.Strings(names)
	if diff := cmp.Diff([]string{"etc/", "etc/group", "etc/passwd", "lockguard"}, names); diff != "" {
		t.Errorf("%s: the layer's files: -want, +got:\n%s", l.name, diff)
	}
	if mode := files["lockguard"].hdr.Mode; mode != 0o755 {
		t.Errorf("%s: /lockguard has mode %o; want 755", l.name, mode)
	}
	if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd names no user 65532: %q", l.name, files["etc/passwd"].data)
	}
	return files
}
