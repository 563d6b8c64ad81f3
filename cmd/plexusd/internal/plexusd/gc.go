package plexusd

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/source"
)

// collectTimeout bounds the collection of one container, lock included.
const collectTimeout = 2 * time.Minute

// collector detaches the records of containers whose sandbox the runtime
// lost without a DEL. CNI 1.1's GC does that, but containerd 1.6 never
// sends it, and records, locks and the delegates' resources (IPAM leases,
// host interfaces) would otherwise stay forever.
type collector struct {
	sandboxes func(ctx context.Context) ([]string, error) // in every state
	records   *record.Store
	// collect is pipeline.Collect.
	collect func(ctx context.Context, id string, stale func() bool) (bool, error)
	// grace: a record written more recently may belong to an ADD whose
	// sandbox the runtime does not list yet.
	grace     time.Duration
	every     time.Duration
	now       func() time.Time
	collected func() // for the metrics, with passed
	passed    func(result string)
	log       *slog.Logger
	// pods is plexusd's pod cache; nil (the manifests source): no guard.
	pods interface {
		CachedPod(namespace, name string) *source.Pod
	}
}

// Results of one pass, the values of plexus_gc_passes_total's label.
const (
	passOK = "ok"
	// passNoList: the runtime did not answer; nothing was collected.
	passNoList = "cri_failed"
	// passPartial: the records or some containers could not be read.
	passPartial = "incomplete"
)

// run makes a pass once synced returns, then every c.every until ctx ends.
func (c *collector) run(ctx context.Context, synced func(context.Context) bool) {
	if !synced(ctx) {
		return
	}
	t := time.NewTicker(c.every)
	defer t.Stop()
	for {
		c.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass collects the stale records once and reports how many.
func (c *collector) pass(ctx context.Context) int {
	live, err := c.sandboxes(ctx)
	if err != nil {
		// No answer is not "no sandboxes": every record would look stale.
		c.log.Warn("stale records: listing the runtime's sandboxes failed, nothing collected", "err", err)
		c.passed(passNoList)
		return 0
	}
	candidates, err := c.candidates(live)
	if err != nil {
		c.log.Warn("stale records: listing records failed", "err", err)
		c.passed(passPartial)
		return 0
	}
	n, failed := 0, 0
	for _, id := range candidates {
		if ctx.Err() != nil {
			return n
		}
		done, err := c.collectOne(ctx, id)
		switch {
		case err != nil:
			failed++
			c.log.Warn("stale records: collecting a container failed, tried again next pass", "container", id, "err", err)
		case done:
			n++
		}
	}
	if failed > 0 {
		c.passed(passPartial)
	} else {
		c.passed(passOK)
	}
	return n
}

// candidates are the recorded containers the runtime does not list.
func (c *collector) candidates(live []string) ([]string, error) {
	known := make(map[string]bool, len(live))
	for _, id := range live {
		known[id] = true
	}
	ids, err := c.records.List()
	if err != nil {
		return nil, err
	}
	var stale []string
	listed := map[string]bool{} // UIDs of pods with a sandbox the runtime lists
	for _, id := range ids {
		switch {
		case known[id]:
			if pod := c.podOf(id); pod != nil {
				listed[pod.UID] = true
			}
		case c.stale(id):
			stale = append(stale, id)
		}
	}
	return c.guard(stale, listed), nil
}

// guard keeps the stale records of pods the API still places on this node
// (same UID) when the runtime lists no other sandbox of theirs: such a
// runtime more likely is not kubelet's (criSocket naming Docker's own
// containerd, say) than lost the only one, and detaching would cut every
// such pod off its networks.
func (c *collector) guard(stale []string, listed map[string]bool) []string {
	if c.pods == nil {
		return stale
	}
	var out []string
	for _, id := range stale {
		pod := c.podOf(id)
		if pod == nil || listed[pod.UID] {
			out = append(out, id)
			continue
		}
		cached := c.pods.CachedPod(pod.Namespace, pod.Name)
		if cached == nil || cached.UID != pod.UID {
			out = append(out, id)
			continue
		}
		c.log.Warn("stale records: the runtime lists no sandbox of a pod the API still has on this node; kept (is criSocket the runtime kubelet uses?)",
			"container", id, "pod", pod.Namespace+"/"+pod.Name)
	}
	return out
}

// podOf is the pod a container's record names, or nil.
func (c *collector) podOf(id string) *record.Pod {
	rec, err := c.records.Load(id)
	if err != nil || rec == nil {
		return nil
	}
	return rec.Pod
}

// stale: the record exists and was last written before the grace period.
func (c *collector) stale(id string) bool {
	t, err := c.records.LastWrite(id)
	return err == nil && c.now().Sub(t) >= c.grace
}

// collectOne detaches one container, deciding again under its lock.
func (c *collector) collectOne(ctx context.Context, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, collectTimeout)
	defer cancel()
	pod := "unknown" // read before: the record is gone once collected
	if p := c.podOf(id); p != nil {
		pod = p.Namespace + "/" + p.Name
	}
	done, err := c.collect(ctx, id, func() bool { return c.stale(id) })
	if err != nil {
		return false, fmt.Errorf("pod %s: %w", pod, err)
	}
	if done {
		c.log.Info("stale records: detached a container the runtime no longer has", "container", id, "pod", pod)
		c.collected()
	}
	return done, nil
}

// startGC starts the collection of stale records when the config names
// the runtime's CRI socket. Its pipeline has no source: a stale record's
// pod name may by now be another pod's (a StatefulSet's).
func (d *Daemon) startGC(ctx context.Context) error {
	if d.conf.CRISocket == "" {
		return nil
	}
	client, err := d.criClient()
	if err != nil {
		return err
	}
	log := d.o.Log.With("cmd", "gc")
	p := d.daemonPipeline(log)
	c := &collector{
		sandboxes: client.SandboxIDs, records: p.Records,
		collect: func(ctx context.Context, id string, stale func() bool) (bool, error) {
			one := *p // as in GC: the DEL's lines name the container
			one.Log = log.With("container", id)
			return one.Collect(ctx, id, stale)
		},
		grace: cmp.Or(time.Duration(d.conf.GCGrace), config.DefaultGCGrace), every: cmp.Or(time.Duration(d.conf.GCInterval), config.DefaultGCInterval),
		now: time.Now, log: log,
		collected: d.m.gcCollected.Inc,
		passed:    func(r string) { d.m.gcPasses.WithLabelValues(r).Inc() },
	}
	synced := func(context.Context) bool { return true }
	if d.cache != nil {
		// Set only then: a nil *cached.Source in the interface is not nil.
		c.pods, synced = d.cache, d.cache.WaitForSync
	}
	go c.run(ctx, synced)
	d.o.Log.Info("stale record collection on", "criSocket", d.conf.CRISocket, "interval", c.every, "grace", c.grace)
	return nil
}
