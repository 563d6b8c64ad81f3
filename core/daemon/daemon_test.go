package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// start serves s on a temporary socket; done is closed when Serve returns.
func start(t *testing.T, s *Server) (*Client, context.CancelFunc, chan struct{}) {
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
	return NewClient(sock), cancel, done
}

func TestCallRoundTrip(t *testing.T) {
	c, _, _ := start(t, &Server{Handler: func(_ context.Context, call *Call) *Reply {
		return &Reply{Stdout: append([]byte(call.Env["CNI_COMMAND"]+":"), call.Stdin...), Failed: call.Env["CNI_COMMAND"] == "DEL"}
	}})
	r, err := c.Do(context.Background(), &Call{Env: map[string]string{"CNI_COMMAND": "ADD"}, Stdin: []byte(`{"x":1}`)})
	if err != nil || string(r.Stdout) != `ADD:{"x":1}` || r.Failed {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = c.Do(context.Background(), &Call{Env: map[string]string{"CNI_COMMAND": "DEL"}})
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
			if _, err := c.Do(context.Background(), &Call{}); err != nil {
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
		r, err := c.Do(context.Background(), &Call{})
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
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := c.WaitReady(ctx); err == nil {
		t.Fatal("not ready yet")
	}
	ready.Store(true)
	if err := c.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	gone := NewClient(filepath.Join(t.TempDir(), "nobody.sock"))
	if _, err := gone.Do(context.Background(), &Call{}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v", err)
	}
}

func TestCNIEnvKeepsOnlyCNIVariables(t *testing.T) {
	env := CNIEnv([]string{"CNI_COMMAND=ADD", "PATH=/bin", "CNI_ARGS=a=b;c=d", "HOME=/root"})
	if len(env) != 2 || env["CNI_ARGS"] != "a=b;c=d" {
		t.Fatalf("%v", env)
	}
}
