package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Defaults of ServerOptions.
const (
	// DefaultMaxConnections bounds the connections the webhook server
	// holds at once (ConnectionLimits.Max). Each costs some tens of KiB
	// (TLS and HTTP buffers, a goroutine, a header): 1024 hold well under
	// the chart's memory limit (docs/hostile-clients.md), and are far more than
	// the API servers and the other replicas open.
	DefaultMaxConnections = 1024
	// DefaultMaxConnectionsPerSource bounds the connections from one
	// source address: half of DefaultMaxConnections, so that one client
	// never holds more than half, and the other half is open to the
	// others without taking a connection from anyone.
	DefaultMaxConnectionsPerSource = DefaultMaxConnections / 2
	// DefaultMaxHeaderBytes bounds a request's header (Go's default is
	// 1 MiB; net/http reads 4 KiB beyond it before answering 431): the
	// API server's and the replicas' are well under 1 KiB. Each
	// connection of a client that sends most of one and stalls holds it
	// (up to twice, as the line grows) until ReadHeaderTimeout: 1,023
	// such connections took 32 MiB of Go heap with 8 KiB, 82 MiB with
	// 32 KiB (e2e/hostile).
	DefaultMaxHeaderBytes = 8 << 10
	// ReadHeaderTimeout is how long the TLS handshake and a request's
	// header may take (controller-runtime's value); IdleTimeout how long an
	// idle connection stays open (http.DefaultTransport's keep-alive).
	ReadHeaderTimeout = 32 * time.Second
	IdleTimeout       = 90 * time.Second
	// ReadTimeout bounds the read of a whole request, from its first
	// byte, on every path: without it net/http reads a body with no
	// deadline. A Gate sets its own (the review's timeout) when its
	// handler starts.
	ReadTimeout = ReadHeaderTimeout
)

// ServerOptions configure a Server. Zero counts take the defaults above.
type ServerOptions struct {
	// Host and Port are where the server listens (Host "": all addresses).
	Host string
	Port int
	// TLSOpts set up the server's tls.Config (certificate, versions,
	// protocols, client certificates).
	TLSOpts []func(*tls.Config)
	// Connections bound the connections held at once.
	Connections ConnectionLimits
	// MaxHeaderBytes: see DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// Closed, when not nil, is told the reason of each connection the
	// connection limits close (ClosedPerSource, ClosedFull,
	// ClosedEvicted).
	Closed func(reason string)
}

// Reasons a Server closes a connection as soon as it is accepted, or
// later in favour of another, as ServerOptions.Closed reports them
// (lockguard_webhook_connections_closed_total).
const (
	// ClosedPerSource: its source address held
	// ConnectionLimits.PerSource.
	ClosedPerSource = "per_source"
	// ClosedFull: ConnectionLimits.Max were open, and its source held
	// as many as any other but one.
	ClosedFull = "full"
	// ClosedMemory: the memory the rest of the process leaves under
	// GOMEMLIMIT had no room for it (ConnectionLimits.Memory), and its
	// source held as many as any other but one.
	ClosedMemory = "memory"
	// ClosedEvicted: closed, while open, for a new connection from a
	// source holding fewer.
	ClosedEvicted = "evicted"
)

// ConnectionLimits bound the connections a Server holds at once. Zero
// counts take the defaults.
type ConnectionLimits struct {
	// Max bounds them all: when Max are open, a new connection from a
	// source address holding fewer (by two or more) than the source
	// holding the most, and less than an even share of those open, is
	// served in place of one of that source's (its
	// oldest idle, else the oldest in its handshake or header, else its
	// oldest), and any other is closed. Default DefaultMaxConnections.
	Max int
	// PerSource bounds those of one source address: its next one is
	// closed. Default DefaultMaxConnectionsPerSource, at most Max.
	PerSource int
	// Memory, when not nil, closes a connection beyond its connection
	// floor when the memory the rest of the process leaves under
	// GOMEMLIMIT has no room for it, as when Max are open (a source
	// holding fewer still takes one of the most-holding source's): the
	// Gate's Limits.Memory.
	Memory *Memory
}

// Server is lockguard's webhook server: a mux of paths, each counted in
// controller-runtime's controller_runtime_webhook_* metrics (Register),
// served by an http.Server that bounds what comes before a
// handler: connections, header bytes, and the time of the handshake and
// the header and of every request, answers given before a body was read
// (which close the connection), and the connections of each source
// address (fairListener). Handlers bound their bodies with a Gate.
type Server struct {
	// Server gives Register and WebhookMux when metrics is nil; its Start
	// is never called.
	ctrlwebhook.Server
	o       ServerOptions
	started atomic.Bool
	// metrics are controller-runtime's webhook metrics, which Register
	// counts the handlers in, on mux (registeredWebhookMetrics); nil if
	// its registry holds other ones, and then Server's Register counts
	// them.
	metrics *webhookMetrics
	mux     *http.ServeMux
}

var _ ctrlwebhook.Server = &Server{}

// NewServer returns a Server of o.
func NewServer(o ServerOptions) *Server {
	if o.Connections.Max <= 0 {
		o.Connections.Max = DefaultMaxConnections
	}
	if o.Connections.PerSource <= 0 {
		o.Connections.PerSource = DefaultMaxConnectionsPerSource
	}
	o.Connections.PerSource = min(o.Connections.PerSource, o.Connections.Max)
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	s := &Server{Server: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: o.Host, Port: o.Port}), o: o}
	if m, ok := registeredWebhookMetrics(ctrlmetrics.Registry); ok {
		s.metrics, s.mux = m, http.NewServeMux()
	}
	return s
}

// Register serves hook at path, counted in controller-runtime's webhook
// metrics under path.
func (s *Server) Register(path string, hook http.Handler) {
	if s.metrics == nil {
		s.Server.Register(path, hook)
		return
	}
	s.mux.Handle(path, s.metrics.instrument(path, hook))
}

// WebhookMux returns the mux of the registered paths.
func (s *Server) WebhookMux() *http.ServeMux {
	if s.metrics == nil {
		return s.Server.WebhookMux()
	}
	return s.mux
}

// NeedLeaderElection is false: every replica serves.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, then shuts down within a minute.
func (s *Server) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("webhook-server")
	cfg := &tls.Config{NextProtos: []string{"h2"}}
	for _, op := range s.o.TLSOpts {
		op(cfg)
	}
	if cfg.GetCertificate == nil && len(cfg.Certificates) == 0 {
		return errors.New("the webhook server has no certificate")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(s.o.Host, strconv.Itoa(s.o.Port)))
	if err != nil {
		return err
	}
	fl := fairListen(ln, s.o.Connections.Max, s.o.Connections.PerSource)
	fl.closed, fl.mem = s.o.Closed, s.o.Connections.Memory
	ln = tls.NewListener(fl, cfg)
	srv := &http.Server{
		BaseContext:       func(net.Listener) context.Context { return ctx },
		Handler:           closeEarlyAnswers(s.WebhookMux()),
		MaxHeaderBytes:    s.o.MaxHeaderBytes,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
		ConnState:         trackState,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Error(err, "Shutting down the webhook server")
		}
	}()
	log.Info("Serving the webhook server", "host", s.o.Host, "port", s.o.Port,
		"maxConnections", s.o.Connections.Max, "maxConnectionsPerSource", s.o.Connections.PerSource, "maxHeaderBytes", s.o.MaxHeaderBytes,
		"yieldsToGOMEMLIMIT", s.o.Connections.Memory != nil && s.o.Connections.Memory.Limit() != math.MaxInt64)
	s.started.Store(true)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-done
	return nil
}

// StartedChecker reports healthy once the server accepts TLS connections.
func (s *Server) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if !s.started.Load() {
			return errors.New("the webhook server has not started yet")
		}
		host := s.o.Host
		if host == "" {
			host = "127.0.0.1"
		}
		d := &net.Dialer{Timeout: 10 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(host, strconv.Itoa(s.o.Port)), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return fmt.Errorf("the webhook server is not reachable: %w", err)
		}
		return conn.Close()
	}
}
