package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// maxRetime bounds what retime reads back from an archive: a packaged
// chart is tens of kilobytes.
const maxRetime = 64 << 20

// retimeCmd rewrites a .tar.gz in place so that its bytes depend on its
// contents only: every entry gets mtime and no access or change time, no
// owner names, and the gzip header no time. helm package stamps the time of
// packaging on every file of a chart; this makes the packaged chart the
// same bytes on every run of the same commit.
func retimeCmd(args []string) error {
	fs := flags("retime")
	mtime := fs.Int64("mtime", 0, "modification time of every entry, in Unix seconds (the commit's time)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("retime: want one FILE.tar.gz or FILE.tgz")
	}
	name := fs.Arg(0)
	in, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	out, err := retime(in, time.Unix(*mtime, 0).UTC())
	if err != nil {
		return fmt.Errorf("retime %s: %w", name, err)
	}
	return os.WriteFile(name, out, 0o644)
}

// retime returns the tar.gz in with every entry's time set to mtime, in the
// same order, with the same names, modes, types and contents, and the gzip
// header's comment and extra field kept (helm's loader ignores them).
func retime(in []byte, mtime time.Time) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(in))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	zw.Header.Comment, zw.Header.Extra = zr.Header.Comment, zr.Header.Extra
	tr := tar.NewReader(zr)
	tw := tar.NewWriter(zw)
	total := int64(0)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if total += h.Size; h.Size < 0 || total > maxRetime {
			return nil, fmt.Errorf("%s: more than %d bytes in the archive", h.Name, maxRetime)
		}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeDir:
		default:
			return nil, fmt.Errorf("%s: entry of type %q; want files and directories only", h.Name, h.Typeflag)
		}
		out := &tar.Header{Typeflag: h.Typeflag, Name: h.Name, Mode: h.Mode, Size: h.Size, ModTime: mtime}
		if err := tw.WriteHeader(out); err != nil {
			return nil, err
		}
		if _, err := io.CopyN(tw, tr, h.Size); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
