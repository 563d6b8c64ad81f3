package node

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/tests/harness"
)

// Cgroup is a cgroup v1 memory + cpuacct group for measuring a process and
// everything it starts afterwards (children inherit the group): plexusd
// with the delegates it runs, as in the DaemonSet's container, or
// containerd with the CNI plugins it runs. The memory group is made under
// the test's own memory group, so the test's limits still hold.
type Cgroup struct {
	t           testing.TB
	mem, cpu    string
	stop        chan struct{}
	done        sync.WaitGroup
	mu          sync.Mutex
	peakAnonKiB int64
	// The memory processes had when added stays charged where it was
	// (this kernel refuses memory.move_charge_at_immigrate): it is added
	// to the peaks, and the limit leaves room for it.
	baseAnonKiB, baseTotalKiB int64
}

// cgroupRoot is where cgroup v1 hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// NewCgroup makes the group, named name plus the test's PID, and removes
// it when t ends: its processes go back to the parent groups first.
func NewCgroup(t testing.TB, name string) *Cgroup {
	t.Helper()
	parent, err := ownCgroup("memory")
	if err != nil {
		skipOrFail(t, "no cgroup v1 memory hierarchy: "+err.Error())
	}
	leaf := fmt.Sprintf("%s-%d", name, os.Getpid())
	c := &Cgroup{t: t,
		mem: filepath.Join(cgroupRoot, "memory", parent, leaf),
		cpu: filepath.Join(cgroupRoot, "cpuacct", leaf),
	}
	for _, d := range []string{c.mem, c.cpu} {
		harness.Must(t, os.Mkdir(d, 0o755))
	}
	t.Cleanup(c.remove)
	return c
}

// ownCgroup is this process's group in a v1 hierarchy (from /proc/self/cgroup).
func ownCgroup(controller string) (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && f[1] == controller {
			return f[2], nil
		}
	}
	return "", fmt.Errorf("no %s controller in /proc/self/cgroup", controller)
}

// Add moves a process (and so its future children) into the group.
func (c *Cgroup) Add(pid int) {
	c.t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	harness.Must(c.t, err)
	c.baseAnonKiB += statusKiB(status, "RssAnon:")
	c.baseTotalKiB += statusKiB(status, "VmRSS:")
	for _, d := range []string{c.mem, c.cpu} {
		harness.Must(c.t, os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644))
	}
}

// statusKiB is a "Key: N kB" line's N in /proc/PID/status.
func statusKiB(status []byte, key string) int64 {
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// LimitMemory sets the group's memory limit, as a container's
// resources.limits.memory does, less what its processes brought along
// (charged elsewhere): call it after Add.
func (c *Cgroup) LimitMemory(bytes int64) {
	c.t.Helper()
	bytes -= c.baseTotalKiB << 10
	harness.Must(c.t, os.WriteFile(filepath.Join(c.mem, "memory.limit_in_bytes"), []byte(strconv.FormatInt(bytes, 10)), 0o644))
}

// Start resets the peaks and samples the group's anonymous memory every
// 20 ms until Stop; the kernel's own peak (memory.max_usage_in_bytes)
// counts page cache too.
func (c *Cgroup) Start() {
	c.t.Helper()
	harness.Must(c.t, os.WriteFile(filepath.Join(c.mem, "memory.max_usage_in_bytes"), []byte("0"), 0o644))
	c.peakAnonKiB = 0
	c.stop = make(chan struct{})
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if kib := c.anonKiB(); kib > 0 {
				c.mu.Lock()
				c.peakAnonKiB = max(c.peakAnonKiB, kib)
				c.mu.Unlock()
			}
			select {
			case <-c.stop:
				return
			case <-tick.C:
			}
		}
	}()
}

// CgroupUsage is what a group used between Start and Stop.
type CgroupUsage struct {
	PeakAnonMiB  float64 // anonymous memory (the heap, stacks), sampled
	PeakTotalMiB float64 // the kernel's peak, page cache included
	// Both include what the processes had when added (an upper bound).
	Failcnt  int64 // times the limit was hit
	OOMKills int64 // processes the kernel killed for the limit
}

// Stop ends the sampling and reads the peaks.
func (c *Cgroup) Stop() CgroupUsage {
	close(c.stop)
	c.done.Wait()
	u := CgroupUsage{
		PeakAnonMiB:  float64(c.peakAnonKiB+c.baseAnonKiB) / 1024,
		PeakTotalMiB: float64(c.readInt(c.mem, "memory.max_usage_in_bytes")+c.baseTotalKiB<<10) / (1 << 20),
		Failcnt:      c.readInt(c.mem, "memory.failcnt"),
	}
	if data, err := os.ReadFile(filepath.Join(c.mem, "memory.oom_control")); err == nil {
		u.OOMKills = statField(data, "oom_kill")
	}
	return u
}

// CPUSeconds is the group's CPU time so far.
func (c *Cgroup) CPUSeconds() float64 {
	return float64(c.readInt(c.cpu, "cpuacct.usage")) / 1e9
}

// anonKiB is the group's anonymous memory: rss in memory.stat (huge pages
// included) plus what is swapped out.
func (c *Cgroup) anonKiB() int64 {
	data, err := os.ReadFile(filepath.Join(c.mem, "memory.stat"))
	if err != nil {
		return 0
	}
	return (statField(data, "total_rss") + statField(data, "total_swap")) / 1024
}

func (c *Cgroup) readInt(dir, file string) int64 {
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		c.t.Errorf("cgroup: %v", err)
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

// statField is a "key value" line's value in a cgroup stat file.
func statField(data []byte, key string) int64 {
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), " "); ok && k == key {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// remove moves the group's processes to the parents and removes the group.
func (c *Cgroup) remove() {
	for _, d := range []string{c.mem, c.cpu} {
		data, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, pid := range strings.Fields(string(data)) {
			_ = os.WriteFile(filepath.Join(filepath.Dir(d), "cgroup.procs"), []byte(pid), 0o644)
		}
		if err := os.Remove(d); err != nil {
			c.t.Errorf("remove cgroup: %v", err)
		}
	}
}
