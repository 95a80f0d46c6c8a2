package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestCgroupMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name    string
		files   []string
		want    int64
		wantErr string
	}{
		{name: "v2 limit", files: []string{write("v2", "268435456\n"), missing}, want: 268435456},
		{name: "v2 unlimited", files: []string{write("v2max", "max\n")}, want: 0},
		{name: "v1 limit after a missing v2 file", files: []string{missing, write("v1", "134217728\n")}, want: 134217728},
		{name: "v1 unlimited", files: []string{write("v1max", "9223372036854771712\n")}, want: 0},
		{name: "no cgroup files", files: []string{missing}, want: 0},
		{name: "garbage", files: []string{write("bad", "lots\n")}, wantErr: `"lots" is not a number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cgroupMemoryLimit(tc.files)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %d, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestSetMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	limit := filepath.Join(t.TempDir(), "memory.max")
	if err := os.WriteFile(limit, []byte("1000000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Setenv("GOMEMLIMIT", "")
	got, err := setMemoryLimit([]string{limit})
	if err != nil || got != 900000000 {
		t.Fatalf("setMemoryLimit = %d, %v; want 900000000", got, err)
	}
	if runtime := debug.SetMemoryLimit(-1); runtime != 900000000 {
		t.Errorf("the runtime's memory limit is %d, want 900000000", runtime)
	}

	debug.SetMemoryLimit(before)
	t.Setenv("GOMEMLIMIT", "100MiB")
	if got, err := setMemoryLimit([]string{limit}); err != nil || got != 0 {
		t.Fatalf("with GOMEMLIMIT set: setMemoryLimit = %d, %v; want 0 (the runtime honours GOMEMLIMIT)", got, err)
	}
	if runtime := debug.SetMemoryLimit(-1); runtime != before {
		t.Errorf("with GOMEMLIMIT set, the runtime's memory limit changed to %d", runtime)
	}
}
