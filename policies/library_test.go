package policies

import (
	"bytes"
	"context"
	"testing"
)

const libraryDir = "library"

func TestLibraryCompilesStrictly(t *testing.T) {
	if err := Check(context.Background(), []string{libraryDir}); err != nil {
		t.Fatal(err)
	}
}

// The shipped *_test.rego files run through OPA's tester, so that
// "go test ./policies/..." fails when a library rule breaks its own tests.
func TestLibraryRegoTests(t *testing.T) {
	var out bytes.Buffer
	sum, err := RunTests(context.Background(), []string{libraryDir}, TestOptions{}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.OK() {
		t.Fatalf("library Rego tests: %+v\n%s", sum, out.String())
	}
	t.Logf("%+v", sum)
}

func TestLibraryIsFormatted(t *testing.T) {
	unformatted, err := Format([]string{libraryDir}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(unformatted) > 0 {
		t.Fatalf("not formatted (run plexusctl policy fmt): %v", unformatted)
	}
}
