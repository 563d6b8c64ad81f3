package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/selection"
)

// plannedIfNames are the interfaces a plan gives, default first.
func plannedIfNames(v *Plan) []string {
	out := []string{v.Default.IfName}
	for _, a := range append(append([]*Planned{}, v.DefaultNetworks...), v.Selections...) {
		out = append(out, a.IfName)
	}
	return out
}

// attachedIfNames are the interfaces the fake delegates were asked to
// ADD, in order.
func attachedIfNames(calls []string) []string {
	var out []string
	for _, c := range calls {
		if f := strings.Fields(c); f[0] == "ADD" {
			out = append(out, f[2])
		}
	}
	return out
}

// TestPlanIsWhatTheAddDecides: for each pod, Plan fails with the very
// error the ADD fails with, and when it does not fail it plans the
// interfaces the ADD attaches; the plan itself runs no delegate and
// leaves no record or lock.
func TestPlanIsWhatTheAddDecides(t *testing.T) {
	tests := []struct {
		name     string
		networks string
		edit     func(f *fixture)
		code     uint // 0: the ADD succeeds
	}{
		{name: "valid selection", networks: "net-b,net-a@data0,net-a"},
		{name: "invalid annotation ignored", networks: `[{"name":"net-a","ips":"x"}]`},
		{name: "invalid annotation strict", networks: `[{"name":"net-a","ips":"x"}]`, edit: func(f *fixture) { f.p.Config.StrictSelection = true }, code: codes.InvalidSelection},
		{name: "missing NAD", networks: "net-a,gone", code: codes.NetworkNotFound},
		{name: "interface taken", networks: "net-a@eth0", code: codes.InterfaceConflict},
		{name: "denied", networks: "net-a,net-b", edit: func(f *fixture) { f.p.Stages.Authorizer = denyNetwork("demo/net-b") }, code: codes.PolicyDenied},
		{name: "compat off", networks: "net-a@data0", edit: func(f *fixture) { f.p.Config.Compat = "off" }},
		{
			name: "defaultNetworks first", networks: "net-a",
			edit: func(f *fixture) { f.p.Config.DefaultNetworks = []string{"demo/net-c"} },
		},
		{
			name: "defaultNetworks missing", networks: "net-a",
			edit: func(f *fixture) { f.p.Config.DefaultNetworks = []string{"gone"} }, code: codes.NetworkNotFound,
		},
		{
			name: "pod default network", networks: "net-a",
			edit: func(f *fixture) {
				f.src.addNAD("kube-system", "calico", `{"cniVersion":"1.0.0","name":"calico","type":"ptp"}`)
				f.src.pods["demo/web"].Annotations[selection.DefaultNetworkAnnotation] = "calico"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, add := newFixture(t, tt.networks), newFixture(t, tt.networks)
			if tt.edit != nil {
				tt.edit(plan)
				tt.edit(add)
			}
			v, perr := plan.p.Plan(context.Background(), plan.req, PlanOptions{})
			_, aerr := add.p.Add(context.Background(), add.req)
			if !reflect.DeepEqual(perr, aerr) {
				t.Fatalf("Plan's error %v, the ADD's %v", perr, aerr)
			}
			if tt.code != 0 && (aerr == nil || cniErr(t, aerr).Code != tt.code) {
				t.Fatalf("the ADD's error %v, want code %d", aerr, tt.code)
			}
			if aerr == nil && !reflect.DeepEqual(plannedIfNames(v), attachedIfNames(add.cni.calls)) {
				t.Errorf("planned %v, the ADD attached %v", plannedIfNames(v), attachedIfNames(add.cni.calls))
			}
			if len(plan.cni.calls) != 0 {
				t.Errorf("the plan ran delegates: %v", plan.cni.calls)
			}
			for _, dir := range []string{"records", "locks"} {
				if _, err := os.Stat(filepath.Join(plan.p.Config.ConfDir, dir)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the plan made %s: %v", dir, err)
				}
			}
		})
	}
}

// TestPlanAllFindsEveryProblem: with All the plan goes past the first
// failure, which stays its error; every failing attachment has its own,
// and an attachment that failed is not asked about again.
func TestPlanAllFindsEveryProblem(t *testing.T) {
	f := newFixture(t, "gone,net-a,net-b,missing")
	auth := &recordingAuthorizer{deny: "demo/net-b"}
	f.p.Stages.Authorizer = auth
	v, err := f.p.Plan(context.Background(), f.req, PlanOptions{All: true})
	if te := cniErr(t, err); te.Code != codes.NetworkNotFound || !strings.Contains(te.Msg, "demo/gone") {
		t.Fatalf("error %+v, want the first failure (demo/gone)", te)
	}
	if v.Failed == nil || v.Failed.Name != "demo/gone" {
		t.Errorf("failed attachment %+v, want demo/gone", v.Failed)
	}
	want := map[string]uint{"demo/gone": codes.NetworkNotFound, "demo/net-a": 0, "demo/net-b": codes.PolicyDenied, "demo/missing": codes.NetworkNotFound}
	for _, a := range v.Selections {
		var got uint
		if a.Err != nil {
			got = a.Err.Code
		}
		if got != want[a.Name] {
			t.Errorf("%s: code %d, want %d (%v)", a.Name, got, want[a.Name], a.Err)
		}
	}
	if got := strings.Join(auth.seen, ","); got != "demo/net-a selection secondary,demo/net-b selection secondary" {
		t.Errorf("the policy was asked about %s, want only the networks that resolved", got)
	}
	if d := v.Selections[2].Decision; d == nil || d.Allowed || d.Reasons[0].Code != "pod-default-network" {
		t.Errorf("net-b's decision %+v", d)
	}
	if v.Selections[1].ConfigSource != "spec.config" || v.Selections[1].IfName != "net2" {
		t.Errorf("net-a planned %+v", v.Selections[1])
	}
}

// TestPlanOffNode: away from the node the plan reads neither the cluster
// network's file nor the node's confDir, nor asks kubelet for devices;
// what it could not read is said, not failed; what the pod and NADs
// alone decide still fails.
func TestPlanOffNode(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(f *fixture)
		code   uint
		unread string // the attachment left to the node
	}{
		{name: "cluster network file", edit: func(f *fixture) { f.p.Config.ClusterNetwork = "/nonexistent/10-net.conflist" }, unread: "default"},
		{name: "NAD without spec.config", edit: func(f *fixture) { f.src.addNAD("demo", "net-a", "") }, unread: "demo/net-a"},
		{name: "device resource", edit: func(f *fixture) {
			f.src.nads["demo/net-a"].Annotations = map[string]string{ResourceNameAnnotation: "vendor.example/netdev"}
		}},
		{name: "claim the pod lacks", edit: func(f *fixture) {
			f.src.nads["demo/net-a"].Annotations = map[string]string{ResourceClaimAnnotation: "nics"}
			f.src.pods["demo/web"].ResourceClaims = map[string]string{}
		}, code: codes.Devices},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "net-a")
			// Inline, the default network is in the config, not on the node.
			f.p.Config.ClusterNetwork = ""
			f.p.Config.Delegates = []json.RawMessage{json.RawMessage(`{"cniVersion":"1.0.0","name":"default-net","type":"bridge"}`)}
			tt.edit(f)
			v, err := f.p.Plan(context.Background(), f.req, PlanOptions{OffNode: true})
			switch {
			case tt.code == 0 && err != nil:
				t.Fatalf("plan failed: %v", err)
			case tt.code != 0 && (err == nil || cniErr(t, err).Code != tt.code):
				t.Fatalf("plan error %v, want code %d", err, tt.code)
			}
			unread := map[string]string{"default": v.Default.Unread, "demo/net-a": v.Selections[0].Unread}
			for name, u := range unread {
				if (u != "") != (name == tt.unread) {
					t.Errorf("%s unread %q, want it said of %q only", name, u, tt.unread)
				}
			}
		})
	}
}
