// Command testreport reads `go test -json` on stdin and prints what go test
// prints without -json: the output of failed tests and the packages'
// closing lines. At the end it lists each skipped test with its reason,
// each failed test's own messages (a CI log's tail then names what failed
// even when a test's logs run to thousands of lines), and the count of
// tests passed and failed. It exits 1 when a test or package failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output events
	Test       string
	Output     string
}

// report is the state of one run: each running test's output, held until
// the test ends, and the tests counted.
type report struct {
	out            io.Writer
	held           map[string][]string // package + " " + test -> output lines
	skips          []string
	failures       []string // each failed test's name and own messages
	passed, failed int
	failedPkg      bool
}

func main() {
	r := &report{out: os.Stdout, held: map[string][]string{}}
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	r.summary()
	if r.failed > 0 || r.failedPkg {
		os.Exit(1)
	}
}

func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintln(r.out, sc.Text()) // not JSON: go's own message
			continue
		}
		r.handle(e)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read go test's output: %w", err)
	}
	return nil
}

func (r *report) handle(e event) {
	key := e.Package + " " + e.Test
	switch {
	case e.Action == "build-output":
		fmt.Fprint(r.out, e.Output)
	case e.Test == "" && e.Action == "output":
		if e.Output != "PASS\n" { // go test without -v hides it
			fmt.Fprint(r.out, e.Output)
		}
	case e.Test == "" && e.Action == "fail":
		r.failedPkg = true
	case e.Test == "":
		// A package's own pass, skip (no test files) or start: not a test.
	case e.Action == "output":
		r.held[key] = append(r.held[key], e.Output)
	case e.Action == "pass":
		r.passed++
		delete(r.held, key)
	case e.Action == "fail":
		r.failed++
		fmt.Fprint(r.out, strings.Join(testLines(r.held[key]), ""))
		r.failures = append(r.failures, failure(e, r.held[key])...)
		delete(r.held, key)
	case e.Action == "skip":
		r.skips = append(r.skips, fmt.Sprintf("SKIPPED %s %s: %s", e.Package, e.Test, reason(r.held[key])))
		delete(r.held, key)
	}
}

// reason is a skipped test's last own line, its t.Skip message, without
// the framing lines go test adds.
func reason(lines []string) string {
	own := testLines(lines)
	if len(own) == 0 {
		return "(no reason given)"
	}
	return strings.TrimSpace(own[len(own)-1])
}

// testLines drops the lines that go test without -v does not print.
func testLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "=== ") && !strings.HasPrefix(t, "--- SKIP") {
			out = append(out, l)
		}
	}
	return out
}

// ownMessage is a line a test wrote through t.Error, t.Fatal or t.Log
// ("    file_test.go:12: ..."), not a line of a log it quotes.
var ownMessage = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)

// maxFailureLine bounds a message in the summary: the whole is above.
const maxFailureLine = 400

// failure is a failed test's name and its own messages, for the summary.
func failure(e event, lines []string) []string {
	out := []string{"FAILED " + e.Package + " " + e.Test}
	for _, l := range lines {
		if !ownMessage.MatchString(l) {
			continue
		}
		l = strings.TrimSpace(l)
		if len(l) > maxFailureLine {
			l = l[:maxFailureLine] + "..."
		}
		out = append(out, "    "+l)
	}
	return out
}

func (r *report) summary() {
	fmt.Fprintf(r.out, "\n%d skipped\n", len(r.skips))
	for _, s := range r.skips {
		fmt.Fprintln(r.out, s)
	}
	for _, f := range r.failures {
		fmt.Fprintln(r.out, f)
	}
	fmt.Fprintf(r.out, "%d passed, %d failed\n", r.passed, r.failed)
}
