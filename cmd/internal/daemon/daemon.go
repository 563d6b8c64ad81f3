// Package daemon is plexusd's side of the unix socket the thick-mode shim
// forwards CNI calls on (its CNI_* environment and stdin), answered with
// what the plugin would have printed. Package wire holds the format and
// the shim's side.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/plexus-cni/plexus/cmd/internal/daemon/wire"
)

// DefaultSocket is where plexusd listens unless configured otherwise.
const DefaultSocket = "/run/plexus/plexusd.sock"

// Call and Reply are the shim's call and plexusd's answer (package wire).
type (
	Call  = wire.Call
	Reply = wire.Reply
)

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

// requestTimeout bounds reading a request: a stuck client holds nothing.
const requestTimeout = 10 * time.Second

// Server serves calls, at most MaxParallel at once.
type Server struct {
	Handler     Handler
	MaxParallel int
	// Ready reports whether calls can be served (the shim's ADD waits).
	Ready func() bool
	Log   *slog.Logger
}

// Serve runs until ctx ends, then waits for the calls in flight.
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
		inflight.Go(func() { s.serveConn(conn, sem) })
	}
}

func (s *Server) serveConn(conn net.Conn, sem chan struct{}) {
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(requestTimeout))
	body, err := io.ReadAll(io.LimitReader(conn, wire.MaxCallBytes+1))
	switch {
	case err != nil:
		s.respond(conn, &wire.Answer{Refused: "reading the request: " + err.Error()})
		return
	case len(body) > wire.MaxCallBytes:
		s.respond(conn, &wire.Answer{Refused: fmt.Sprintf("request over %d bytes", wire.MaxCallBytes)})
		// Closing with the rest unread would reset and lose the answer.
		io.Copy(io.Discard, io.LimitReader(conn, wire.MaxCallBytes))
		return
	}
	req, err := wire.DecodeRequest(body)
	if err != nil {
		s.respond(conn, &wire.Answer{Refused: "decoding the request: " + err.Error()})
		return
	}
	if req.Ready {
		s.respond(conn, &wire.Answer{Ready: s.Ready == nil || s.Ready()})
		return
	}
	sem <- struct{}{}
	defer func() { <-sem }()
	// The call outlives a shim that gives up: a half-done ADD must finish
	// or roll back, never stop in between.
	s.respond(conn, &wire.Answer{Reply: s.Handler(context.Background(), req.Call)})
}

func (s *Server) respond(conn net.Conn, a *wire.Answer) {
	conn.SetWriteDeadline(time.Now().Add(requestTimeout))
	if _, err := conn.Write(wire.EncodeAnswer(a)); err != nil && s.Log != nil {
		s.Log.Warn("writing reply", "err", err)
	}
}
