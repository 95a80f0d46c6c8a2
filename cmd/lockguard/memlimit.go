package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimitFraction is the share of the container's memory limit that
// the Go runtime's soft limit gets; the rest is headroom for what the
// runtime does not count against it (goroutine stacks grow, the binary).
const memoryLimitFraction = 0.9

// cgroupLimitFiles are where a container's memory limit is read from:
// cgroup v2, then v1.
var cgroupLimitFiles = []string{
	"/sys/fs/cgroup/memory.max",
	"/sys/fs/cgroup/memory/memory.limit_in_bytes",
}

// setMemoryLimit gives the Go runtime a soft memory limit of 90% of the
// container's memory limit, so that the garbage collector works harder
// before the kernel would kill lockguard (a burst of Locks briefly holds
// their Events). It does nothing when GOMEMLIMIT is set (the runtime
// honours it) or when there is no limit. It returns the limit set, 0 for
// none.
func setMemoryLimit(files []string) (int64, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	limit, err := cgroupMemoryLimit(files)
	if err != nil || limit <= 0 {
		return 0, err
	}
	soft := int64(float64(limit) * memoryLimitFraction)
	debug.SetMemoryLimit(soft)
	return soft, nil
}

// cgroupMemoryLimit returns the memory limit in the first of files that
// exists, or 0 when none does or it says there is no limit ("max" in
// cgroup v2, a huge number in v1).
func cgroupMemoryLimit(files []string) (int64, error) {
	for _, f := range files {
		b, err := os.ReadFile(filepath.Clean(f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("reading the memory limit: %w", err)
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reading the memory limit from %s: %q is not a number", f, s)
		}
		if n >= 1<<62 { // cgroup v1's "unlimited" is a page-rounded maximum int64
			return 0, nil
		}
		return n, nil
	}
	return 0, nil
}
