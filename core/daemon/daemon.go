// Package daemon carries CNI calls from the plexus shim to plexusd over a
// unix socket (thick mode): the shim sends the call's CNI_* environment and
// stdin, plexusd runs the same pipeline and answers with what the plugin
// would have printed.
package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// DefaultSocket is where plexusd listens unless configured otherwise.
const DefaultSocket = "/run/plexus/plexusd.sock"

// MaxCallBytes bounds one call: CNI configs and results are small.
const MaxCallBytes = 4 << 20

// Call is one CNI invocation as the runtime made it.
type Call struct {
	// Env holds the CNI_* variables.
	Env   map[string]string `json:"env"`
	Stdin []byte            `json:"stdin"`
}

// Reply is what the plugin prints: a result, or an error document when
// Failed (the shim then exits non-zero).
type Reply struct {
	Stdout []byte `json:"stdout"`
	Failed bool   `json:"failed"`
}

// Handler runs one call.
type Handler func(ctx context.Context, c *Call) *Reply

// Listen opens the socket, replacing a stale one, readable by root only.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("restricting %s to root: %w", path, err)
	}
	return ln, nil
}

// Server serves calls, at most MaxParallel at once.
type Server struct {
	Handler     Handler
	MaxParallel int
	// Ready reports whether calls can be served (caches synced, default
	// network present); the shim waits for it before an ADD.
	Ready func() bool
	Log   *slog.Logger
}

// Serve runs until ctx ends, then stops accepting and waits for the calls
// in flight (graceful shutdown).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.MaxParallel <= 0 {
		s.MaxParallel = 32
	}
	sem := make(chan struct{}, s.MaxParallel)
	var inflight sync.WaitGroup
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/cni", func(w http.ResponseWriter, r *http.Request) {
		inflight.Add(1)
		defer inflight.Done()
		select {
		case sem <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		defer func() { <-sem }()
		s.serveCall(w, r)
	})
	mux.HandleFunc("GET /v1/ready", func(w http.ResponseWriter, _ *http.Request) {
		if s.Ready != nil && !s.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := srv.Shutdown(sctx)
	inflight.Wait()
	return err
}

func (s *Server) serveCall(w http.ResponseWriter, r *http.Request) {
	var c Call
	if err := json.NewDecoder(io.LimitReader(r.Body, MaxCallBytes)).Decode(&c); err != nil {
		http.Error(w, "decoding call: "+err.Error(), http.StatusBadRequest)
		return
	}
	// The call outlives a shim that gives up: a half-done ADD must finish
	// or roll back, never stop in between.
	ctx := context.WithoutCancel(r.Context())
	reply := s.Handler(ctx, &c)
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(reply); err != nil && s.Log != nil {
		s.Log.Warn("writing reply", "err", err)
	}
}

// Client is the shim's side.
type Client struct {
	Socket string
	http   *http.Client
}

// NewClient returns a client of the daemon at socket.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	return &Client{Socket: socket, http: &http.Client{Transport: tr}}
}

// ErrUnreachable is wrapped when the daemon cannot be reached at all, as
// opposed to failing a call.
var ErrUnreachable = errors.New("plexusd is unreachable")

// Do sends one call.
func (c *Client) Do(ctx context.Context, call *Call) (*Reply, error) {
	body, err := json.Marshal(call)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://plexusd/v1/cni", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %v", ErrUnreachable, c.Socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("plexusd at %s answered %s: %s", c.Socket, resp.Status, strings.TrimSpace(string(b)))
	}
	var reply Reply
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxCallBytes)).Decode(&reply); err != nil {
		return nil, fmt.Errorf("decoding plexusd's reply: %w", err)
	}
	return &reply, nil
}

// WaitReady polls until the daemon says it is ready or ctx ends.
func (c *Client) WaitReady(ctx context.Context) error {
	var last error
	for wait := 20 * time.Millisecond; ; wait = min(wait*2, 500*time.Millisecond) {
		last = c.ready(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for plexusd at %s: %w", c.Socket, last)
		case <-time.After(wait):
		}
	}
}

func (c *Client) ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://plexusd/v1/ready", nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: not ready (%s)", ErrUnreachable, resp.Status)
	}
	return nil
}

// CNIEnv collects the CNI_* variables of an environment.
func CNIEnv(environ []string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, "CNI_") {
			env[k] = v
		}
	}
	return env
}
