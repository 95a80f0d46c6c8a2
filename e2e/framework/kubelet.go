package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ProjectSecret writes data into dir the way kubelet projects a Secret
// volume (its AtomicWriter): the files go into a new timestamped directory,
// a "..data" symlink is switched to it atomically (a rename), each key is a
// symlink "key -> ..data/key", and the previous timestamped directory is
// removed. A reader that follows the key symlinks sees either the old or the
// new files, never a mix.
func ProjectSecret(dir string, data map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	const dataLink = "..data"
	old, _ := os.Readlink(filepath.Join(dir, dataLink))

	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	if err := os.Chmod(ts, 0o755); err != nil {
		return err
	}
	for k, v := range data {
		if strings.Contains(k, "/") || strings.HasPrefix(k, "..") {
			return fmt.Errorf("key %q cannot be projected", k)
		}
		if err := os.WriteFile(filepath.Join(ts, k), v, 0o644); err != nil {
			return err
		}
	}
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(ts), tmpLink); err != nil {
		return err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataLink)); err != nil {
		return err
	}
	for k := range data {
		link := filepath.Join(dir, k)
		if target, err := os.Readlink(link); err == nil && target == filepath.Join(dataLink, k) {
			continue
		}
		if err := os.Symlink(filepath.Join(dataLink, k), link); err != nil {
			return err
		}
	}
	if old != "" {
		return os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}
