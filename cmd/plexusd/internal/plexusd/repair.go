package plexusd

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/source"
)

// statusRepair restores network-status (s5) that a restart of plexusd
// lost: plexusd answers an ADD before it publishes the status. Once the
// pod cache has synced, every pod whose record an earlier plexusd wrote,
// and which is still the record's pod, gets its status written from the
// record when it does not list the record's attachments or holds prefixes
// in "ips" where s5.3.3 has addresses (pipeline.Republish).
type statusRepair struct {
	records interface {
		List() ([]string, error)
		Load(containerID string) (*record.Record, error)
		LastWrite(containerID string) (time.Time, error)
	}
	pods interface {
		CachedPod(namespace, name string) *source.Pod
	}
	republish func(ctx context.Context, containerID string, pod *source.Pod) (bool, error)
	started   time.Time
	log       *slog.Logger
	repaired  func() // counts the statuses written
}

// run repairs what the records describe and returns how many it wrote.
func (r *statusRepair) run(ctx context.Context) int {
	ids, err := r.records.List()
	if err != nil {
		r.log.Warn("status repair: listing attachment records", "err", err)
		return 0
	}
	candidates := r.candidates(ids)
	n := 0
	for id, pod := range candidates {
		wrote, err := r.republish(ctx, id, pod)
		switch {
		case errors.Is(err, pipeline.ErrNoRecord), errors.Is(err, pipeline.ErrNotSettled):
			// DELed meanwhile, or its ADD never finished: nothing to show.
		case err != nil:
			r.log.Warn("status repair: writing network-status from the record", "pod", pod.Ref(), "container", id, "err", err)
		case wrote:
			n++
			r.repaired()
			r.log.Info("network-status written from the attachment record (lost by a plexusd restart, or with prefixes in ips)", "pod", pod.Ref(), "container", id)
		}
	}
	return n
}

// candidates maps each container whose record an earlier plexusd wrote to
// its pod, for pods that are still the record's (same UID) and have exactly
// one such record: with two, which one the status should show is unknown.
func (r *statusRepair) candidates(ids []string) map[string]*source.Pod {
	byPod := map[string][]string{}
	pods := map[string]*source.Pod{}
	for _, id := range ids {
		rec, err := r.records.Load(id)
		if err != nil || rec == nil || rec.Pod == nil {
			continue
		}
		if at, err := r.records.LastWrite(id); err != nil || !at.Before(r.started) {
			continue
		}
		pod := r.pods.CachedPod(rec.Pod.Namespace, rec.Pod.Name)
		if pod == nil || pod.UID != rec.Pod.UID {
			continue
		}
		byPod[pod.UID] = append(byPod[pod.UID], id)
		pods[pod.UID] = pod
	}
	out := map[string]*source.Pod{}
	for uid, ids := range byPod {
		if len(ids) == 1 {
			out[ids[0]] = pods[uid]
		} else {
			r.log.Info("status repair: pod has several attachment records, left alone", "pod", pods[uid].Ref(), "containers", ids)
		}
	}
	return out
}

// startStatusRepair runs the repair once the pod cache has synced.
func (d *Daemon) startStatusRepair(ctx context.Context, started time.Time) {
	if d.cache == nil {
		return
	}
	log := d.o.Log.With("cmd", "repair")
	p := d.daemonPipeline(log)
	p.Source = d.src
	r := &statusRepair{records: p.Records, pods: d.cache, republish: p.Republish, started: started, log: log, repaired: d.m.statusRepaired.Inc}
	go func() {
		if d.cache.WaitForSync(ctx) {
			r.run(ctx)
		}
	}()
}
