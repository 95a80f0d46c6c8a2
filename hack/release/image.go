package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// The image's files besides the binary: the users and groups of
// distroless's static image, so that 65532 has a name (nonroot). The
// Dockerfile writes the same (image_test.go compares them).
const (
	etcPasswd = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	etcGroup  = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
)

// Media types of the OCI image specification.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// imageCmd writes lockguard's image for each ARCH=BINARY without a
// container engine or a registry, as the Dockerfile builds it FROM scratch:
// one layer with /etc/passwd, /etc/group and /lockguard, user 65532:65532,
// entrypoint /lockguard. PREFIX_linux_ARCH.tar holds one architecture (an
// OCI layout with docker's manifest.json too: docker load and kind load
// image-archive read it); PREFIX.oci.tar holds every one behind an image
// index, the multi-architecture image to push.
func imageCmd(args []string) error {
	fs := flags("image")
	repo := fs.String("repo", "", "the image's repository, e.g. ghcr.io/navique/lockguard")
	tag := fs.String("tag", "", "the image's tag (the chart's appVersion)")
	version := fs.String("version", "", "the release, for the image's labels")
	mtime := fs.Int64("mtime", 0, "time of the image and its files, in Unix seconds (the commit's time)")
	prefix := fs.String("o", "", "PREFIX of the archives to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *repo == "" || *tag == "" || *version == "" || *prefix == "" || fs.NArg() == 0 {
		return errors.New("image: want -repo, -tag, -version, -o and ARCH=BINARY...")
	}
	ref := *repo + ":" + *tag
	created := time.Unix(*mtime, 0).UTC()
	var images []*ociImage
	for _, a := range fs.Args() {
		arch, path, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("image: %q is not ARCH=BINARY", a)
		}
		bin, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		img, err := buildImage(arch, bin, *version, created)
		if err != nil {
			return err
		}
		images = append(images, img)
		data, err := img.archive(ref, *tag, created)
		if err != nil {
			return err
		}
		if err := os.WriteFile(*prefix+"_linux_"+arch+".tar", data, 0o644); err != nil {
			return err
		}
	}
	data, err := indexArchive(images, ref, *tag, created)
	if err != nil {
		return err
	}
	return os.WriteFile(*prefix+".oci.tar", data, 0o644)
}

// blob is content addressed by its sha256.
type blob struct {
	mediaType string
	data      []byte
}

func (b blob) digest() string {
	sum := sha256.Sum256(b.data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (b blob) descriptor() descriptor {
	return descriptor{MediaType: b.mediaType, Digest: b.digest(), Size: int64(len(b.data))}
}

func (b blob) path() string { return "blobs/sha256/" + strings.TrimPrefix(b.digest(), "sha256:") }

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

// ociImage is one architecture's image: its layer, config and manifest.
type ociImage struct {
	platform                platform
	layer, config, manifest blob
}

func buildImage(arch string, bin []byte, version string, created time.Time) (*ociImage, error) {
	var layerTar bytes.Buffer
	files := []file{
		{name: "etc/group", mode: 0o644, data: []byte(etcGroup)},
		{name: "etc/passwd", mode: 0o644, data: []byte(etcPasswd)},
		{name: "lockguard", mode: 0o755, data: bin},
	}
	if err := writeTar(&layerTar, files, created); err != nil {
		return nil, err
	}
	diffID := sha256.Sum256(layerTar.Bytes())
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(layerTar.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	p := platform{Architecture: arch, OS: "linux"}
	if arch == "arm64" {
		p.Variant = "v8"
	}
	img := &ociImage{platform: p, layer: blob{mediaLayer, gz.Bytes()}}

	labels := map[string]string{
		"org.opencontainers.image.source":  "https://github.com/navique/lockguard",
		"org.opencontainers.image.title":   "lockguard",
		"org.opencontainers.image.version": version,
	}
	config := map[string]any{
		"created":      created.Format(time.RFC3339),
		"architecture": p.Architecture,
		"os":           p.OS,
		"config": map[string]any{
			"User":       "65532:65532",
			"Entrypoint": []string{"/lockguard"},
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			"Labels":     labels,
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
		"history": []map[string]any{{
			"created":    created.Format(time.RFC3339),
			"created_by": "make release (hack/release): /etc/passwd, /etc/group and /lockguard FROM scratch",
		}},
	}
	if p.Variant != "" {
		config["variant"] = p.Variant
	}
	if img.config, err = jsonBlob(mediaConfig, config); err != nil {
		return nil, err
	}
	manifest := map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        img.config.descriptor(),
		"layers":        []descriptor{img.layer.descriptor()},
		"annotations":   labels,
	}
	if img.manifest, err = jsonBlob(mediaManifest, manifest); err != nil {
		return nil, err
	}
	return img, nil
}

// jsonBlob encodes v as JSON (map keys sorted, so always the same bytes).
func jsonBlob(mediaType string, v any) (blob, error) {
	data, err := json.Marshal(v)
	return blob{mediaType, data}, err
}

// refAnnotations name an image in an OCI layout's index.json: containerd
// (kind load image-archive) and docker read the full name, the OCI
// specification's ref.name is the tag.
func refAnnotations(ref, tag string) map[string]string {
	return map[string]string{
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": tag,
	}
}

// archive returns the image as an OCI layout in a tar, with docker's
// manifest.json beside it, as docker save writes since Docker 25.
func (img *ociImage) archive(ref, tag string, created time.Time) ([]byte, error) {
	d := img.manifest.descriptor()
	d.Platform = &img.platform
	d.Annotations = refAnnotations(ref, tag)
	index, err := jsonBlob(mediaIndex, map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{d}})
	if err != nil {
		return nil, err
	}
	dockerManifest, err := json.Marshal([]map[string]any{{
		"Config":   img.config.path(),
		"RepoTags": []string{ref},
		"Layers":   []string{img.layer.path()},
	}})
	if err != nil {
		return nil, err
	}
	return layoutTar(index.data, []blob{img.layer, img.config, img.manifest}, map[string][]byte{"manifest.json": dockerManifest}, created)
}

// indexArchive returns every image behind one image index, in an OCI
// layout in a tar.
func indexArchive(images []*ociImage, ref, tag string, created time.Time) ([]byte, error) {
	var manifests []descriptor
	var blobs []blob
	for _, img := range images {
		d := img.manifest.descriptor()
		d.Platform = &img.platform
		manifests = append(manifests, d)
		blobs = append(blobs, img.layer, img.config, img.manifest)
	}
	imageIndex, err := jsonBlob(mediaIndex, map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": manifests})
	if err != nil {
		return nil, err
	}
	d := imageIndex.descriptor()
	d.Annotations = refAnnotations(ref, tag)
	index, err := jsonBlob(mediaIndex, map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{d}})
	if err != nil {
		return nil, err
	}
	return layoutTar(index.data, append(blobs, imageIndex), nil, created)
}

// layoutTar returns an OCI image layout as a tar: oci-layout, index.json,
// the blobs (each once, sorted) and extra files, all named in order.
func layoutTar(index []byte, blobs []blob, extra map[string][]byte, created time.Time) ([]byte, error) {
	byPath := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json": index,
	}
	for _, b := range blobs {
		byPath[b.path()] = b.data
	}
	for name, data := range extra {
		byPath[name] = data
	}
	var names []string
	for name := range byPath {
		names = append(names, name)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	files := make([]file, 0, len(names))
	for _, name := range names {
		files = append(files, file{name: name, mode: 0o644, data: byPath[name]})
	}
	if err := writeTar(&buf, files, created); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
