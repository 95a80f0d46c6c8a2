//go:build e2e

package hostile

import (
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/navique/lockguard/internal/peers"
	"github.com/navique/lockguard/internal/transport"
)

// stalledLeaseBodies are the connections of TestStalledLeaseBodies: more
// bodies of stalledBodyLength than the byte budget holds twice over.
const stalledLeaseBodies = 24

// TestStalledLeaseBodies: 24 connections from 127.0.0.10 each send all
// but the last byte of a 7,000,000-byte body to the identity Leases' path
// (/validate-peer-lease), which anyone who reaches the port can post to,
// and stall. What lockguard's Go heap holds (after a garbage collection)
// grows by at most the byte budget (64 MiB) and the connections' own
// memory, as on every other path (TestStalledBodies): the path is read
// within the webhook server's Gate (issue 36, docs/contract.md rule 17).
func TestStalledLeaseBodies(t *testing.T) {
	idle := heapAfterGC(t)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
		sent  int
	)
	cfg := target.tls.Clone()
	cfg.ServerName = target.lg.Webhook.Host
	body := strings.Repeat("x", stalledBodyLength-1)
	head := "POST " + peers.LeaseGuardPath + " HTTP/1.1\r\nHost: lockguard\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(stalledBodyLength) + "\r\n\r\n"
	for range stalledLeaseBodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := dialHostile("127.0.0.10", cfg)
			if err != nil {
				t.Errorf("dialing from 127.0.0.10: %v", err)
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			_ = conn.SetWriteDeadline(time.Now().Add(time.Minute))
			n, _ := io.WriteString(conn, head+body)
			mu.Lock()
			if n == len(head)+len(body) {
				sent++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	held := heapAfterGC(t)
	report(t, "%d bodies of %d bytes stalled a byte short on %s (%d sent whole but the last byte): Go heap after a collection %.1f MiB idle, %.1f MiB while they stall (%+.1f MiB)",
		stalledLeaseBodies, stalledBodyLength, peers.LeaseGuardPath, sent, idle/(1<<20), held/(1<<20), (held-idle)/(1<<20))
	if bound := idle + transport.DefaultMaxBufferedBytes + stalledSlack; held > bound {
		t.Errorf("Go heap %.1f MiB after a collection while %d bodies stall on %s, over idle (%.1f MiB) + the byte budget (%d MiB) + %d MiB",
			held/(1<<20), stalledLeaseBodies, peers.LeaseGuardPath, idle/(1<<20), transport.DefaultMaxBufferedBytes>>20, stalledSlack>>20)
	}
}
