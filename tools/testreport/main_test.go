package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestReportCountsTestsNotPackages: a package without tests or a
// package's own pass is no test; a skipped test is listed with its reason.
func TestReportCountsTestsNotPackages(t *testing.T) {
	in := `{"Action":"skip","Package":"a/b"}
{"Action":"run","Package":"a/c","Test":"TestX"}
{"Action":"output","Package":"a/c","Test":"TestX","Output":"    x_test.go:5: no kernel\n"}
{"Action":"skip","Package":"a/c","Test":"TestX"}
{"Action":"run","Package":"a/c","Test":"TestY"}
{"Action":"pass","Package":"a/c","Test":"TestY"}
{"Action":"pass","Package":"a/c"}
`
	out := reportOf(t, in)
	want := "\n1 skipped\nSKIPPED a/c TestX: x_test.go:5: no kernel\n1 passed, 0 failed\n"
	if out != want {
		t.Errorf("report:\n%q\nwant\n%q", out, want)
	}
}

// TestReportEndsWithEachFailuresMessages: a failed test's own messages
// are repeated after the skips, without the log lines it quoted, so the
// tail of a long run names what failed.
func TestReportEndsWithEachFailuresMessages(t *testing.T) {
	in := `{"Action":"run","Package":"a/c","Test":"TestX"}
{"Action":"output","Package":"a/c","Test":"TestX","Output":"    x_test.go:9: leaked host interface veth1\n"}
{"Action":"output","Package":"a/c","Test":"TestX","Output":"    node_test.go:40: kubelet's log:\n"}
{"Action":"output","Package":"a/c","Test":"TestX","Output":"        I1128 04:26:48 kubelet.go:2725] SyncLoop DELETE\n"}
{"Action":"output","Package":"a/c","Test":"TestX","Output":"--- FAIL: TestX (1.00s)\n"}
{"Action":"fail","Package":"a/c","Test":"TestX"}
`
	out := reportOf(t, in)
	want := "\n0 skipped\nFAILED a/c TestX\n    x_test.go:9: leaked host interface veth1\n    node_test.go:40: kubelet's log:\n0 passed, 1 failed\n"
	got := out
	if i := strings.Index(got, "\n0 skipped"); i < 0 || got[i:] != want {
		t.Errorf("report's end:\n%q\nwant\n%q", got, want)
	}
}

// reportOf is what testreport prints for go test's JSON in.
func reportOf(t *testing.T, in string) string {
	t.Helper()
	var out bytes.Buffer
	r := &report{out: &out, held: map[string][]string{}}
	if err := r.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	r.summary()
	return out.String()
}
