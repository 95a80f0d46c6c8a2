package transport

import "strconv"

// gateHeld is what g holds: requests in flight and body bytes beyond the
// buffers kept for reuse.
func gateHeld(g *Gate) (int, int64) {
	g.share.mu.Lock()
	defer g.share.mu.Unlock()
	return g.share.total, g.budget.inUse()
}

func itoa(n int) string { return strconv.Itoa(n) }
