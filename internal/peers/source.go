package peers

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"
)

// Static is a fixed list of the other replicas.
type Static []string

// Run calls set once.
func (s Static) Run(ctx context.Context, set func([]string)) error {
	set(s)
	<-ctx.Done()
	return nil
}

// File lists the other replicas in a file, one host:port per line (blank
// lines and those starting with # ignored), read every second: for local
// runs, where a harness plays the part of the identity Leases.
type File struct {
	Path string
	// Self is left out of the list.
	Self string
}

// Run reads the file every second and calls set when it changes. A file
// that cannot be read keeps the last list.
func (f File) Run(ctx context.Context, set func([]string)) error {
	var last []string
	known := false
	for {
		if data, err := os.ReadFile(f.Path); err == nil {
			var peers []string
			for _, line := range strings.Split(string(data), "\n") {
				line = strings.TrimSpace(line)
				if line != "" && !strings.HasPrefix(line, "#") && line != f.Self {
					peers = append(peers, line)
				}
			}
			slices.Sort(peers)
			if !known || !slices.Equal(peers, last) {
				set(peers)
				last, known = peers, true
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// ParseList splits a comma-separated host:port list, checking each.
func ParseList(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(p); err != nil {
			return nil, fmt.Errorf("peer %q is not host:port: %w", p, err)
		}
		out = append(out, p)
	}
	return out, nil
}
