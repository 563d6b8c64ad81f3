// Package daemon carries CNI calls from the plexus shim to plexusd over a
// unix socket (thick mode): the shim sends the call's CNI_* environment and
// stdin, plexusd runs the same pipeline and answers with what the plugin
// would have printed.
package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
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

// The protocol is one exchange per connection, so that the shim needs no
// HTTP stack (its start-up is paid on every CNI call): the client writes a
// request object and closes its side for writing, the server answers with
// one response object and closes the connection.
type request struct {
	Op   string `json:"op"` // "cni" or "ready"
	Call *Call  `json:"call,omitempty"`
}

type response struct {
	Reply *Reply `json:"reply,omitempty"`
	Ready bool   `json:"ready,omitempty"`
	// Error says why the request itself could not be served.
	Error string `json:"error,omitempty"`
}

const (
	opCNI   = "cni"
	opReady = "ready"
	// requestTimeout bounds reading a request, so a stuck client cannot
	// hold a connection (and a goroutine) forever.
	requestTimeout = 10 * time.Second
)

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
	defer inflight.Wait()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accepting on the plexusd socket: %w", err)
		}
		inflight.Add(1)
		go func() {
			defer inflight.Done()
			s.serveConn(conn, sem)
		}()
	}
}

func (s *Server) serveConn(conn net.Conn, sem chan struct{}) {
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(requestTimeout))
	in := bufio.NewReader(conn)
	if s.refuseHTTP(conn, in) {
		return
	}
	var req request
	body, err := io.ReadAll(io.LimitReader(in, MaxCallBytes+1))
	switch {
	case err != nil:
		s.respond(conn, &response{Error: "reading the request: " + err.Error()})
		return
	case len(body) > MaxCallBytes:
		s.respond(conn, &response{Error: fmt.Sprintf("request over %d bytes", MaxCallBytes)})
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.respond(conn, &response{Error: "decoding the request: " + err.Error()})
		return
	}
	switch {
	case req.Op == opReady:
		s.respond(conn, &response{Ready: s.Ready == nil || s.Ready()})
	case req.Op == opCNI && req.Call != nil:
		sem <- struct{}{}
		defer func() { <-sem }()
		// The call outlives a shim that gives up: a half-done ADD must
		// finish or roll back, never stop in between.
		s.respond(conn, &response{Reply: s.Handler(context.Background(), req.Call)})
	default:
		s.respond(conn, &response{Error: fmt.Sprintf("unknown request %q", req.Op)})
	}
}

// refuseHTTP answers a shim of an older plexus, which spoke HTTP on this
// socket, with an HTTP error it can show, instead of waiting for the end of
// a request such a client never closes. It happens for the calls in flight
// while a node is upgraded; the runtime retries them with the new shim.
func (s *Server) refuseHTTP(conn net.Conn, in *bufio.Reader) bool {
	head, _ := in.Peek(5)
	if string(head) != "POST " && string(head) != "GET /" {
		return false
	}
	msg := "this plexusd does not speak HTTP on its socket: the plexus-shim binary is from another version of plexus (finish the upgrade of the node)"
	conn.SetWriteDeadline(time.Now().Add(requestTimeout))
	fmt.Fprintf(conn, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(msg), msg)
	if s.Log != nil {
		s.Log.Warn("refused an HTTP request on the socket: a shim of another plexus version")
	}
	return true
}

func (s *Server) respond(conn net.Conn, r *response) {
	conn.SetWriteDeadline(time.Now().Add(requestTimeout))
	if err := json.NewEncoder(conn).Encode(r); err != nil && s.Log != nil {
		s.Log.Warn("writing reply", "err", err)
	}
}

// Client is the shim's side.
type Client struct {
	Socket string
}

// NewClient returns a client of the daemon at socket.
func NewClient(socket string) *Client {
	return &Client{Socket: socket}
}

// ErrUnreachable is wrapped when the daemon cannot be reached at all, as
// opposed to failing a call.
var ErrUnreachable = errors.New("plexusd is unreachable")

// Do sends one call.
func (c *Client) Do(ctx context.Context, call *Call) (*Reply, error) {
	resp, err := c.exchange(ctx, &request{Op: opCNI, Call: call})
	if err != nil {
		return nil, err
	}
	if resp.Reply == nil {
		return nil, fmt.Errorf("plexusd at %s answered without a reply", c.Socket)
	}
	return resp.Reply, nil
}

// exchange makes one request. Failing to connect or to send is
// ErrUnreachable: plexusd did not get the call. Once it has it, a lost
// answer is not, since the call may have run.
func (c *Client) exchange(ctx context.Context, req *request) (*response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %v", ErrUnreachable, c.Socket, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := conn.Write(body); err != nil {
		return nil, fmt.Errorf("%w at %s: sending the call: %v", ErrUnreachable, c.Socket, err)
	}
	if err := conn.(*net.UnixConn).CloseWrite(); err != nil {
		return nil, fmt.Errorf("%w at %s: sending the call: %v", ErrUnreachable, c.Socket, err)
	}
	var resp response
	if err := json.NewDecoder(io.LimitReader(conn, MaxCallBytes)).Decode(&resp); err != nil {
		return nil, fmt.Errorf("reading plexusd's reply from %s: %w", c.Socket, err)
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("plexusd at %s refused the request: %s", c.Socket, resp.Error)
	}
	return &resp, nil
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
	resp, err := c.exchange(ctx, &request{Op: opReady})
	if err != nil {
		return err
	}
	if !resp.Ready {
		return fmt.Errorf("%w: not ready", ErrUnreachable)
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
