package measure

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// memCgroup is a memory cgroup of the benchmark's own that holds one
// process under a limit, as a container's memory limit does: the kernel
// charges it the process's anonymous memory, the pages of the files it
// reads (reclaimed first) and its kernel memory, and kills the process
// when it cannot reclaim under the limit.
type memCgroup struct {
	dir string
	v2  bool
}

// newMemCgroup makes a memory cgroup named name limited to limit bytes,
// without swap: cgroup v2 where its memory controller is on, else v1's
// memory hierarchy. It needs root.
func newMemCgroup(name string, limit int64) (*memCgroup, error) {
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && slices.Contains(strings.Fields(string(b)), "memory") {
		g := &memCgroup{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}
		return g, g.make(map[string]int64{"memory.max": limit, "memory.swap.max": 0})
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		g := &memCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", name)}
		files := map[string]int64{"memory.limit_in_bytes": limit}
		if _, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"); err == nil {
			files["memory.memsw.limit_in_bytes"] = limit
		}
		return g, g.make(files)
	}
	return nil, errors.New("no memory cgroup to make (cgroup v2 with its memory controller, or v1's /sys/fs/cgroup/memory)")
}

// make creates the cgroup and writes its limits (memsw after the limit,
// which it may not be under).
func (g *memCgroup) make(files map[string]int64) error {
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return fmt.Errorf("making the memory cgroup: %w", err)
	}
	for _, name := range []string{"memory.max", "memory.swap.max", "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"} {
		if v, ok := files[name]; ok {
			if err := os.WriteFile(filepath.Join(g.dir, name), []byte(strconv.FormatInt(v, 10)), 0o644); err != nil {
				g.remove()
				return fmt.Errorf("limiting the memory cgroup: %w", err)
			}
		}
	}
	return nil
}

// Kind says which cgroup version it is.
func (g *memCgroup) kind() string {
	if g.v2 {
		return "cgroup v2"
	}
	return "cgroup v1"
}

// add moves process pid into the cgroup: what it allocates from then on is
// charged to it.
func (g *memCgroup) add(pid int) error {
	return os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// peak is the largest usage charged to the cgroup.
func (g *memCgroup) peak() (int64, error) {
	name := "memory.max_usage_in_bytes"
	if g.v2 {
		name = "memory.peak"
	}
	b, err := os.ReadFile(filepath.Join(g.dir, name))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// oomKills is how many processes of the cgroup the kernel killed at its
// limit.
func (g *memCgroup) oomKills() (int64, error) {
	name := "memory.oom_control"
	if g.v2 {
		name = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(g.dir, name))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no oom_kill in %s", name)
}

// remove removes the cgroup, once its process has exited.
func (g *memCgroup) remove() { _ = os.Remove(g.dir) }

// charged is what the cgroup is charged now: its usage, and of it the
// anonymous memory, the files' pages and the kernel's memory (cgroup
// v1's rss, cache and kmem; v2's anon, file and kernel).
type charged struct{ Usage, Anon, File, Kernel int64 }

// charged reads the cgroup's charges.
func (g *memCgroup) charged() (charged, error) {
	var c charged
	usage, stat, keys := "memory.usage_in_bytes", "memory.stat", [3]string{"rss", "cache", ""}
	if g.v2 {
		usage, keys = "memory.current", [3]string{"anon", "file", "kernel"}
	}
	b, err := os.ReadFile(filepath.Join(g.dir, usage))
	if err != nil {
		return c, err
	}
	if c.Usage, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
		return c, err
	}
	if b, err = os.ReadFile(filepath.Join(g.dir, stat)); err != nil {
		return c, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case keys[0]:
			c.Anon = n
		case keys[1]:
			c.File = n
		case keys[2]:
			c.Kernel = n
		}
	}
	if !g.v2 {
		if b, err := os.ReadFile(filepath.Join(g.dir, "memory.kmem.usage_in_bytes")); err == nil {
			c.Kernel, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
	}
	return c, nil
}

// watch samples the cgroup's charges every interval until the function
// it returns is called, which returns the sample of the largest usage.
func (g *memCgroup) watch(every time.Duration) func() charged {
	return watchPeak(every, g.charged, func(a, b charged) bool { return a.Usage < b.Usage })
}
