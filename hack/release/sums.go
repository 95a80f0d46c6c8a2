package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// sumsCmd writes DIST/SHA256SUMS: the sha256 of every other file in DIST,
// sorted by name, in the format of `sha256sum` (checked with sha256sum -c).
func sumsCmd(args []string) error {
	fs := flags("sums")
	dir := fs.String("dir", "", "the release directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("sums: want -dir")
	}
	entries, err := os.ReadDir(*dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != "SHA256SUMS" {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(*dir, name))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), name)
	}
	return os.WriteFile(filepath.Join(*dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}
