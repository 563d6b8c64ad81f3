package main

import (
	"strings"
	"testing"
)

func TestParseFlagsRefusesStrayArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string // "": accepted
	}{
		{[]string{"--cni-bin-dir=/opt/cni/bin"}, ""},
		{[]string{"--cni-bin-dir", "/opt/cni/bin", "--readiness", "wait"}, ""},
		{[]string{"--readiness=wait", "/opt/cni/bin"}, `unexpected argument "/opt/cni/bin"`},
		{[]string{"--uninstall", "true"}, `unexpected argument "true"`},
		{[]string{"--readiness=later"}, `--readiness "later"`},
	} {
		_, err := parseFlags(tc.args)
		if tc.err == "" && err != nil {
			t.Errorf("%q: %v", tc.args, err)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: err = %v, want one with %q", tc.args, err, tc.err)
		}
	}
}
