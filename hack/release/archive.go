package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// archiveCmd writes a .tar.gz or .zip of FILEs, each at the archive's top
// level under its base name.
func archiveCmd(args []string) error {
	fs := flags("archive")
	out := fs.String("o", "", "the archive to write: NAME.tar.gz or NAME.zip")
	mtime := fs.Int64("mtime", 0, "modification time of every entry, in Unix seconds (the commit's time)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() == 0 {
		return errors.New("archive: want -o and at least one file")
	}
	var files []file
	for _, p := range fs.Args() {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if st.Mode().Perm()&0o111 != 0 {
			mode = 0o755
		}
		files = append(files, file{name: filepath.Base(p), mode: mode, data: data})
	}
	data, err := writeArchive(*out, files, time.Unix(*mtime, 0).UTC())
	if err != nil {
		return err
	}
	return os.WriteFile(*out, data, 0o644)
}

// file is one entry of an archive.
type file struct {
	name string
	mode int64
	data []byte
}

// writeArchive returns the bytes of a tar.gz or a zip (by the suffix of
// name) holding files in the order given. Nothing in it depends on the
// machine, the user or the time of the build: every entry has mtime, owner
// 0:0 without names, and the gzip header no name and no time.
func writeArchive(name string, files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	switch {
	case strings.HasSuffix(name, ".tar.gz"):
		zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if err != nil {
			return nil, err
		}
		if err := writeTar(zw, files, mtime); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
	case strings.HasSuffix(name, ".zip"):
		zw := zip.NewWriter(&buf)
		for _, f := range files {
			h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: mtime}
			h.SetMode(os.FileMode(f.mode))
			w, err := zw.CreateHeader(h)
			if err != nil {
				return nil, err
			}
			if _, err := w.Write(f.data); err != nil {
				return nil, err
			}
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("archive %s: want .tar.gz or .zip", name)
	}
	return buf.Bytes(), nil
}

// writeTar writes files as a tar stream to w, each directory that holds
// one ("etc/", "blobs/sha256/") before its first file.
func writeTar(w io.Writer, files []file, mtime time.Time) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	for _, f := range files {
		for i, c := range f.name {
			if dir := f.name[:i+1]; c == '/' && !dirs[dir] {
				dirs[dir] = true
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: mtime, Format: tar.FormatUSTAR}); err != nil {
					return err
				}
			}
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}
