package explain

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
)

func TestPrintableEscapesWhatTerminalsActOn(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"team-a/blue", "team-a/blue"},
		{"ünïcödé 网络", "ünïcödé 网络"},
		{"\x1b[2J\x1b]0;owned\x07", `\x1b[2J\x1b]0;owned\a`},
		{"a\rPROBLEM", `a\rPROBLEM`},
		{"a\nResult: ok", `a\nResult: ok`},
		{"\u009b31m", `\u009b31m`},
		{"abc\u202edef", `abc\u202edef`},
		{"zero\u200bwidth", `zero\u200bwidth`},
		{"del\x7f", `del\x7f`},
		{"bad\xffutf8", `bad\xffutf8`},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestWriteTextEscapesClusterText: a pod author's annotation and a node
// credential's PlexusNode strings reach the admin's terminal escaped.
func TestWriteTextEscapesClusterText(t *testing.T) {
	hostile := "blue\x1b]0;pwned\x07\x1b[2K\rResult: OK"
	node := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: PlexusNamespace, Name: "plexusd-x", Labels: map[string]string{"app.kubernetes.io/name": "plexus"}},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
	}
	fc := fakeCluster{pods: []*corev1.Pod{testPod("team-a", "web", networks(hostile)), node}}
	fc.plexus = append(fc.plexus, plexusNodeObj("node-1", plexusapi.PlexusNodeStatus{
		Mode: "thick\x1b[31m", Version: "v1\x1b]8;;http://evil\x07", DefaultNetwork: "pod-net\x1b[1A",
	}))
	r, err := Explain(t.Context(), Options{Namespace: "team-a", Name: "web", Cluster: fc.cluster(t), Node: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteText(&out, r); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if i := strings.IndexAny(text, "\x1b\x07\r"); i >= 0 {
		t.Fatalf("output carries a control character at %d:\n%q", i, text)
	}
	for _, want := range []string{`blue\x1b]0;pwned\a`, `thick\x1b[31m`, `pod-net\x1b[1A`} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks the escaped %s:\n%s", want, text)
		}
	}
}
