package plexusd

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/source"
)

// repairRecords are records with their last write times.
type repairRecords map[string]struct {
	rec *record.Record
	at  time.Time
}

func (r repairRecords) List() ([]string, error) {
	var ids []string
	for id := range r {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

func (r repairRecords) Load(id string) (*record.Record, error) { return r[id].rec, nil }

func (r repairRecords) LastWrite(id string) (time.Time, error) {
	e, ok := r[id]
	if !ok {
		return time.Time{}, os.ErrNotExist
	}
	return e.at, nil
}

type repairPods map[string]*source.Pod

func (p repairPods) CachedPod(ns, name string) *source.Pod { return p[ns+"/"+name] }

func TestStatusRepairRewritesOnlyWhatAnEarlierPlexusdLeft(t *testing.T) {
	started := time.Now()
	before, after := started.Add(-time.Minute), started.Add(time.Second)
	rec := func(id, name, uid string) *record.Record {
		return &record.Record{ContainerID: id, Pod: &record.Pod{Namespace: "ns", Name: name, UID: uid}}
	}
	records := repairRecords{
		"lost":      {rec("lost", "a", "ua"), before},
		"mine":      {rec("mine", "b", "ub"), after},        // this plexusd's: queued
		"recreated": {rec("recreated", "c", "old"), before}, // the pod has another UID now
		"twice-1":   {rec("twice-1", "d", "ud"), before},
		"twice-2":   {rec("twice-2", "d", "ud"), before},
		"gone":      {rec("gone", "e", "ue"), before}, // no such pod any more
		"failing":   {rec("failing", "f", "uf"), before},
		"unsettled": {rec("unsettled", "g", "ug"), before},
	}
	pods := repairPods{}
	for _, p := range []*source.Pod{{Name: "a", UID: "ua"}, {Name: "b", UID: "ub"}, {Name: "c", UID: "new"}, {Name: "d", UID: "ud"}, {Name: "f", UID: "uf"}, {Name: "g", UID: "ug"}} {
		p.Namespace = "ns"
		pods["ns/"+p.Name] = p
	}
	var asked []string
	repaired := 0
	r := &statusRepair{records: records, pods: pods, started: started, log: slog.New(slog.DiscardHandler),
		repaired: func() { repaired++ },
		republish: func(_ context.Context, id string, pod *source.Pod) (bool, error) {
			asked = append(asked, id)
			switch id {
			case "failing":
				return false, errors.New("API down")
			case "unsettled":
				return false, pipeline.ErrNotSettled
			}
			return true, nil
		}}
	if n := r.run(context.Background()); n != 1 || repaired != 1 {
		t.Errorf("run = %d (metric %d), want 1 status restored", n, repaired)
	}
	slices.Sort(asked)
	if want := []string{"failing", "lost", "unsettled"}; !slices.Equal(asked, want) {
		t.Errorf("republished %v, want %v", asked, want)
	}
}
