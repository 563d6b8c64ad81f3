package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/cmd/internal/daemon/wire"
)

// start serves s on a temporary socket; done is closed when Serve returns.
func start(t *testing.T, s *Server) (*wire.Client, context.CancelFunc, chan struct{}) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "run", "plexusd.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Serve(ctx, ln); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return &wire.Client{Socket: sock}, cancel, done
}

func TestCallRoundTrip(t *testing.T) {
	c, _, _ := start(t, &Server{Handler: func(_ context.Context, call *Call) *Reply {
		return &Reply{Stdout: append([]byte(call.Env["CNI_COMMAND"]+":"), call.Stdin...), Failed: call.Env["CNI_COMMAND"] == "DEL"}
	}})
	r, err := c.Do(&Call{Env: map[string]string{"CNI_COMMAND": "ADD"}, Stdin: []byte(`{"x":1}`)})
	if err != nil || string(r.Stdout) != `ADD:{"x":1}` || r.Failed {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = c.Do(&Call{Env: map[string]string{"CNI_COMMAND": "DEL"}})
	if err != nil || !r.Failed {
		t.Fatalf("a failed call must come back failed: %+v %v", r, err)
	}
}

func TestSocketIsRootOnly(t *testing.T) {
	c, _, _ := start(t, &Server{Handler: func(context.Context, *Call) *Reply { return &Reply{} }})
	fi, err := os.Stat(c.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v", fi.Mode().Perm())
	}
	di, _ := os.Stat(filepath.Dir(c.Socket))
	if di.Mode().Perm() != 0o700 {
		t.Errorf("socket directory mode %v", di.Mode().Perm())
	}
}

func TestMaxParallelBoundsCalls(t *testing.T) {
	var inside, peak atomic.Int32
	release := make(chan struct{})
	c, _, _ := start(t, &Server{MaxParallel: 2, Handler: func(context.Context, *Call) *Reply {
		n := inside.Add(1)
		for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
		}
		<-release
		inside.Add(-1)
		return &Reply{}
	}})
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Do(&Call{}); err != nil {
				t.Error(err)
			}
		}()
	}
	for inside.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if peak.Load() != 2 {
		t.Fatalf("%d calls ran at once, limit 2", peak.Load())
	}
}

func TestGracefulShutdownFinishesInFlightCalls(t *testing.T) {
	entered := make(chan struct{})
	finish := make(chan struct{})
	c, cancel, done := start(t, &Server{Handler: func(context.Context, *Call) *Reply {
		close(entered)
		<-finish
		return &Reply{Stdout: []byte("done")}
	}})
	got := make(chan *Reply, 1)
	go func() {
		r, err := c.Do(&Call{})
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	<-entered
	cancel()
	select {
	case <-done:
		t.Fatal("Serve returned with a call in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(finish)
	if r := <-got; r == nil || string(r.Stdout) != "done" {
		t.Fatalf("in-flight call lost: %+v", r)
	}
	<-done
}

func TestWaitReadyAndUnreachable(t *testing.T) {
	var ready atomic.Bool
	c, _, _ := start(t, &Server{Ready: ready.Load, Handler: func(context.Context, *Call) *Reply { return &Reply{} }})
	if err := c.WaitReady(time.Now().Add(100 * time.Millisecond)); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("not ready yet, but %v", err)
	}
	ready.Store(true)
	if err := c.WaitReady(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	gone := &wire.Client{Socket: filepath.Join(t.TempDir(), "nobody.sock")}
	if _, err := gone.Do(&Call{}); !errors.Is(err, wire.ErrUnreachable) || !strings.Contains(err.Error(), "nobody.sock") {
		t.Fatalf("err = %v", err)
	}
}

// A request that is not a call gets an error naming what was wrong; the
// handler never runs and the server keeps serving.
func TestBadRequestsAreRefused(t *testing.T) {
	var calls atomic.Int32
	c, _, _ := start(t, &Server{Handler: func(context.Context, *Call) *Reply { calls.Add(1); return &Reply{} }})
	call := wire.EncodeCall(&Call{Env: map[string]string{"CNI_COMMAND": "ADD"}, Stdin: []byte("{}")})
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"not a call", []byte("hello, plexusd"), "decoding the request: not a plexus call"},
		{"unknown operation", []byte("plexus-call/1\nX"), "unknown request type"},
		{"truncated call", call[:len(call)-1], "truncated"},
		{"bytes after the call", append(call, 'x'), "1 bytes after the end"},
		{"over the size limit", append(append([]byte{}, call...), make([]byte, wire.MaxCallBytes)...), "request over"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := exchangeRaw(t, c.Socket, tc.body)
			if !strings.Contains(a.Refused, tc.want) {
				t.Errorf("refused %q, want it to contain %q", a.Refused, tc.want)
			}
		})
	}
	if calls.Load() != 0 {
		t.Errorf("the handler ran %d times for bad requests", calls.Load())
	}
	if _, err := c.Do(&Call{}); err != nil {
		t.Fatalf("a good call after bad ones: %v", err)
	}
}

// exchangeRaw sends body as a request and decodes the answer.
func exchangeRaw(t *testing.T, socket string, body []byte) *wire.Answer {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() {
		conn.Write(body)
		conn.(*net.UnixConn).CloseWrite()
	}()
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	a, err := wire.DecodeAnswer(b)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
