package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/plexus-cni/plexus/tests/harness"
)

// testEndpointSliceFromStatus: a controller publishing the endpoints of a
// secondary network, as EndpointSlice builders for Multus networks do,
// takes the pod's addresses from its network-status entry (s5.3.3: "ips"
// holds IPv4 and IPv6 addresses) and creates a discovery.k8s.io/v1
// EndpointSlice per family; the kube-apiserver's validation accepts only
// an address there, not a prefix such as "10.100.0.2/24". This holds for
// the status of an ADD in thin and thick mode, for one plexusd restores
// after it was lost, and for one plexusd rewrites when it holds prefixes.
func (s *suite) testEndpointSliceFromStatus(t *testing.T) {
	tests := []struct {
		name  string
		thick bool
		// restart, in thick mode, stops plexusd after the ADD, sets the
		// pod's network-status to what it returns (nil: none) and starts
		// plexusd again, which writes the status from its record.
		restart func(t *testing.T, published string) *string
	}{
		{name: "thin"},
		{name: "thick", thick: true},
		{name: "thick status restored", thick: true, restart: func(*testing.T, string) *string { return nil }},
		{name: "thick status with prefixes rewritten", thick: true, restart: func(t *testing.T, published string) *string {
			doc := withPrefixes(t, published)
			return &doc
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, ns := s.world(t)
			s.nad(t, ns, "blue", dualStackNADConfig(w, "blue"))
			pod := s.pod(t, ns, "web", "blue")
			c := container(w, pod)
			var d *harness.Daemon
			if tt.thick {
				d = w.StartDaemon("--node-name", "node-a")
			}
			before := harness.HostVeths(t)
			w.Add(c)
			published := s.rawStatus(t, ns, "web", nil)
			if tt.restart != nil {
				d.Stop()
				set := tt.restart(t, published)
				s.setStatus(t, ns, "web", set)
				d.Start()
				s.rawStatus(t, ns, "web", func(doc string) bool { return set == nil || doc != *set })
			}

			var sec *harness.StatusEntry
			st := s.status(t, ns, "web")
			for i := range st {
				if st[i].Name == ns+"/blue" && !st[i].Default {
					sec = &st[i]
				}
			}
			if sec == nil || sec.Interface != "net1" {
				t.Fatalf("network-status has no entry for %s/blue on net1: %+v", ns, st)
			}
			got := s.endpointSlices(t, pod, "blue", sec.IPs)
			if want := c.IPs(t, "net1"); !reflect.DeepEqual(got, want) {
				t.Errorf("EndpointSlices of %s/blue hold %v; net1 has %v", ns, got, want)
			}
			if len(got) != 2 {
				t.Errorf("EndpointSlices of %s/blue hold %v, want an IPv4 and an IPv6 address", ns, got)
			}
			w.Del(c)
			w.AssertNoLeaks(before)
		})
	}
}

// endpointSlices creates, for the pod's addresses on network (as
// network-status lists them), one EndpointSlice per address family through
// the kube-apiserver, and returns the addresses the created slices hold,
// sorted. The family is read off the text (":" is IPv6), the address
// passed on as it is: the apiserver is the one judging it.
func (s *suite) endpointSlices(t *testing.T, pod *corev1.Pod, network string, ips []string) []string {
	t.Helper()
	byType := map[discoveryv1.AddressType][]string{}
	for _, ip := range ips {
		typ := discoveryv1.AddressTypeIPv4
		if strings.Contains(ip, ":") {
			typ = discoveryv1.AddressTypeIPv6
		}
		byType[typ] = append(byType[typ], ip)
	}
	var out []string
	for typ, addrs := range byType {
		es := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name:      fmt.Sprintf("%s-%s-%s", network, pod.Name, strings.ToLower(string(typ))),
				Namespace: pod.Namespace,
				Labels:    map[string]string{discoveryv1.LabelServiceName: network, discoveryv1.LabelManagedBy: "e2e.plexus.io"},
			},
			AddressType: typ,
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  addrs,
				Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			}},
		}
		created, err := s.admin.DiscoveryV1().EndpointSlices(pod.Namespace).Create(t.Context(), es, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("kube-apiserver refused the %s EndpointSlice built from network-status ips %q: %v", typ, addrs, err)
		}
		for _, ep := range created.Endpoints {
			out = append(out, ep.Addresses...)
		}
	}
	slices.Sort(out)
	return out
}

// rawStatus is the pod's network-status annotation once it is there and,
// with done, done accepts it; the wait is a bound, not a measurement.
func (s *suite) rawStatus(t *testing.T, namespace, name string, done func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, ok := s.getPod(t, namespace, name).Annotations[statusAnnotation]
		if ok && (done == nil || done(raw)) {
			return raw
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s/%s: %s not as awaited within 30s: %q", namespace, name, statusAnnotation, raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// setStatus sets the pod's network-status annotation as a user could,
// removing it for nil.
func (s *suite) setStatus(t *testing.T, namespace, name string, doc *string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{statusAnnotation: doc}}})
	harness.Must(t, err)
	if _, err := s.admin.CoreV1().Pods(namespace).Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// withPrefixes is the status document with each "ips" address made a
// prefix (/24, /64), keeping every other key as it is.
func withPrefixes(t *testing.T, doc string) string {
	t.Helper()
	var list []map[string]any
	harness.Must(t, json.Unmarshal([]byte(doc), &list))
	for _, e := range list {
		ips, _ := e["ips"].([]any)
		for i, v := range ips {
			a, err := netip.ParseAddr(v.(string))
			harness.Must(t, err)
			bits := 24
			if a.Is6() {
				bits = 64
			}
			ips[i] = netip.PrefixFrom(a, bits).String()
		}
	}
	b, err := json.Marshal(list)
	harness.Must(t, err)
	return string(b)
}

// dualStackNADConfig is the spec.config of a NAD for a fresh bridge
// network whose host-local IPAM hands out an IPv4 and an IPv6 address.
func dualStackNADConfig(w *harness.World, name string) string {
	v4 := harness.Subnet()
	var a, b int
	_, _ = fmt.Sscanf(v4, "10.%d.%d.0/24", &a, &b)
	conf, _ := json.Marshal(map[string]any{
		"cniVersion": "1.0.0", "name": name, "type": "bridge", "bridge": w.Bridge(),
		"ipam": map[string]any{"type": "host-local", "dataDir": w.IPAMDir, "ranges": []any{
			[]any{map[string]any{"subnet": v4}},
			[]any{map[string]any{"subnet": fmt.Sprintf("fd10:%d:%d::/64", a, b)}},
		}},
	})
	return string(conf)
}
