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
	var out bytes.Buffer
	r := &report{out: &out, held: map[string][]string{}}
	if err := r.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	r.summary()
	want := "\n1 skipped\nSKIPPED a/c TestX: x_test.go:5: no kernel\n1 passed, 0 failed\n"
	if out.String() != want {
		t.Errorf("report:\n%q\nwant\n%q", out.String(), want)
	}
}
