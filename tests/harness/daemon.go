package harness

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Daemon is a plexusd process serving a World in thick mode.
type Daemon struct {
	w       *World
	cmd     *exec.Cmd
	exited  chan struct{}
	args    []string
	Socket  string
	Metrics string
	LogPath string
}

// StartDaemon writes plexusd's config from the World's plexus config,
// switches the World's plugin config to the shim and starts plexusd; it is
// stopped when the test ends. args are extra plexusd flags.
func (w *World) StartDaemon(args ...string) *Daemon {
	w.t.Helper()
	d := &Daemon{w: w, Socket: filepath.Join(w.Dir, "run", "plexusd.sock"), LogPath: filepath.Join(w.Dir, "plexusd.log")}
	d.Metrics = freeAddr(w.t)
	conf := map[string]any{}
	for k, v := range w.Plexus {
		switch k {
		case "clusterNetwork", "daemonSocket", "daemonWait", "type":
		default:
			conf[k] = v
		}
	}
	b, err := json.Marshal(conf)
	Must(w.t, err)
	cfgPath := filepath.Join(w.Dir, "plexusd.json")
	w.WriteFile(cfgPath, string(b))
	d.args = append([]string{"--config", cfgPath, "--socket", d.Socket, "--metrics-addr", d.Metrics, "--install-config=false", "--log-level", "debug"}, args...)
	w.Set("daemonSocket", d.Socket)
	w.Set("type", "plexus-shim")
	d.Start()
	w.t.Cleanup(d.Stop)
	return d
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Must(t, err)
	defer l.Close()
	return l.Addr().String()
}

// Start runs plexusd and waits until it answers.
func (d *Daemon) Start() {
	d.w.t.Helper()
	logf, err := os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	Must(d.w.t, err)
	d.cmd = exec.Command(filepath.Join(BinDir, "plexusd"), d.args...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	d.exited = make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the forking thread exits; netns helpers end
		// their locked threads, so this one holds its own until plexusd exits.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := d.cmd.Start()
		started <- err
		if err == nil {
			_ = d.cmd.Wait()
		}
		close(d.exited)
	}()
	Must(d.w.t, <-started)
	logf.Close()
	if err := d.waitReady(time.Now().Add(30 * time.Second)); err != nil {
		d.w.t.Fatalf("plexusd did not come up: %v\n%s", err, d.Log())
	}
}

// waitReady polls /readyz, as kubelet's readiness probe does: plexusd
// answers 200 once its socket listens and its caches are synced.
func (d *Daemon) waitReady(deadline time.Time) error {
	c := &http.Client{Timeout: time.Second}
	url := "http://" + d.Metrics + "/readyz"
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			return fmt.Errorf("plexusd exited")
		default:
		}
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not ready by the deadline: %w", last)
}

// Stop ends plexusd with SIGTERM (graceful) and waits.
func (d *Daemon) Stop() {
	if d.exited == nil {
		return
	}
	select {
	case <-d.exited:
	default:
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		<-d.exited
	}
}

// Kill ends plexusd with SIGKILL, as a crash would.
func (d *Daemon) Kill() {
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	<-d.exited
}

// Log is plexusd's output so far.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(d.LogPath)
	return string(b)
}

// Metric returns the sum of the samples of a metric whose line contains
// every filter, from plexusd's /metrics.
func (d *Daemon) Metric(name string, filters ...string) float64 {
	d.w.t.Helper()
	return SumMetric(httpGet(d.w.t, "http://"+d.Metrics+"/metrics"), name, filters...)
}

// SumMetric is the sum of the samples, in a Prometheus text exposition, of
// the metric name whose line contains every filter.
func SumMetric(body, name string, filters ...string) float64 {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		ok := true
		for _, f := range filters {
			ok = ok && strings.Contains(line, f)
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); ok && err == nil {
			sum += v
		}
	}
	return sum
}

// Pid is plexusd's process id.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Running reports whether plexusd has not exited (a crash, an OOM kill).
func (d *Daemon) Running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}
