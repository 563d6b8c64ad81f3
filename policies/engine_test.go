package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/pipeline"
)

// Every library rule, evaluated through the engine with every rule enabled
// (testdata/config-all.yaml), so the Go path and the Rego tests agree.
func TestLibraryRulesThroughEngine(t *testing.T) {
	e := libraryEngine(t)
	tests := []struct {
		name       string
		annotation string
		change     func(*pipeline.AuthorizeRequest)
		wantCodes  string
		wantInMsg  []string
	}{
		{name: "plain selection of own namespace is allowed", annotation: "blue"},
		{name: "network of a global namespace is allowed", annotation: "shared/blue"},
		{
			name: "network of another namespace is denied", annotation: "team-b/blue",
			wantCodes: "namespace-isolation", wantInMsg: []string{"team-a/web-0", "team-b/blue"},
		},
		{
			name: "namespace not in the NAD's allow list is denied", annotation: "blue",
			change:    annotate(map[string]string{"plexus.io/allowed-namespaces": "team-b"}),
			wantCodes: "nad-allowlist", wantInMsg: []string{"team-a/web-0", "team-a/blue", "plexus.io/allowed-namespaces"},
		},
		{
			name: "pod matching the NAD's selector is allowed", annotation: "blue",
			change: annotate(map[string]string{"plexus.io/allowed-pod-selector": "app=web,tier in (gold,silver)"}),
		},
		{
			name: "pod not matching the NAD's selector is denied", annotation: "blue",
			change:    annotate(map[string]string{"plexus.io/allowed-pod-selector": "app notin (web)"}),
			wantCodes: "nad-allowlist", wantInMsg: []string{"do not match"},
		},
		{
			name: "more selections than the cap are denied", annotation: "blue,blue,blue,blue",
			wantCodes: "max-attachments", wantInMsg: []string{"4 networks", "the 3 allowed"},
		},
		{
			name:       "static address in the namespace's range is allowed",
			annotation: `[{"name":"blue","ips":["10.10.0.7/24","fd00:a::7"]}]`,
		},
		{
			name:       "static address outside the namespace's range is denied",
			annotation: `[{"name":"blue","ips":["10.99.0.7"]}]`,
			wantCodes:  "static-ip-range", wantInMsg: []string{"10.99.0.7", "team-a/blue"},
		},
		{
			name:       "MAC request from a namespace not allowed to is denied",
			annotation: `[{"name":"blue","mac":"02:00:00:00:00:01"}]`,
			wantCodes:  "mac-not-allowed", wantInMsg: []string{"02:00:00:00:00:01"},
		},
		{
			name:       "interface request from a namespace not allowed to is denied",
			annotation: `[{"name":"blue","interface":"data0"}]`,
			wantCodes:  "interface-not-allowed", wantInMsg: []string{"data0"},
		},
		{
			name:       "host port below the bound is denied",
			annotation: `[{"name":"blue","portMappings":[{"hostPort":22,"containerPort":22}]}]`,
			wantCodes:  "host-port", wantInMsg: []string{"host port 22"},
		},
		{
			name:       "every violated rule is reported",
			annotation: `[{"name":"blue","namespace":"team-b","mac":"02:00:00:00:00:01","interface":"data0","ips":["10.99.0.1"]}]`,
			wantCodes:  "interface-not-allowed,mac-not-allowed,namespace-isolation,static-ip-range",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := newRequest(t, tc.annotation)
			if tc.change != nil {
				tc.change(req)
			}
			d, err := e.Authorize(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := codes(d); got != tc.wantCodes || d.Allowed != (tc.wantCodes == "") {
				t.Fatalf("decision %+v: codes %q, want %q", d, got, tc.wantCodes)
			}
			for _, s := range tc.wantInMsg {
				if !strings.Contains(d.Reasons[0].Message, s) {
					t.Errorf("message %q does not mention %q", d.Reasons[0].Message, s)
				}
			}
		})
	}
}

func annotate(a map[string]string) func(*pipeline.AuthorizeRequest) {
	return func(r *pipeline.AuthorizeRequest) { r.Attachment.NAD.Annotations = a }
}

// s7.4: whatever keeps the policy from answering clearly denies the
// attachment, with a reason code that says what went wrong.
func TestFailClosed(t *testing.T) {
	tests := []struct {
		name     string
		policy   string
		query    string
		wantCode string
		wantMsg  string
	}{
		{
			name:     "undefined decision",
			policy:   decisionPolicy(`{"allowed": true, "reasons": []} if input.pod.name == "someone-else"`),
			wantCode: CodeUndefined, wantMsg: "undefined",
		},
		{
			name: "conflicting outputs",
			policy: decisionPolicy(`{"allowed": true, "reasons": []} if input.pod.name
decision := {"allowed": false, "reasons": [{"code": "x", "message": "y"}]} if input.pod.namespace`),
			wantCode: CodeError, wantMsg: "conflict",
		},
		{
			name:     "built-in error",
			policy:   decisionPolicy(`{"allowed": to_number(input.pod.name) > 0, "reasons": []}`),
			wantCode: CodeError, wantMsg: "to_number",
		},
		{
			name:     "decision is not an object",
			policy:   decisionPolicy(`"allow"`),
			wantCode: CodeMalformed, wantMsg: "not an object",
		},
		{
			name:     "allowed is missing",
			policy:   decisionPolicy(`{"reasons": []}`),
			wantCode: CodeMalformed, wantMsg: "allowed",
		},
		{
			name:     "allowed is not a boolean",
			policy:   decisionPolicy(`{"allowed": "yes"}`),
			wantCode: CodeMalformed, wantMsg: "allowed",
		},
		{
			name:     "reasons is not an array",
			policy:   decisionPolicy(`{"allowed": false, "reasons": {"code": "x", "message": "y"}}`),
			wantCode: CodeMalformed, wantMsg: "not an array",
		},
		{
			name:     "reason without message",
			policy:   decisionPolicy(`{"allowed": false, "reasons": [{"code": "x"}]}`),
			wantCode: CodeMalformed, wantMsg: "reasons[0]",
		},
		{
			name:     "denial without a reason",
			policy:   decisionPolicy(`{"allowed": false, "reasons": []}`),
			wantCode: CodeMalformed, wantMsg: "without a reason",
		},
		{
			name:     "query with several results",
			policy:   "package plexus.authz\n\ndecisions := [{\"allowed\": true}, {\"allowed\": true}]\n",
			query:    "data.plexus.authz.decisions[_]",
			wantCode: CodeMalformed, wantMsg: "2 results",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"policy.rego": tc.policy})
			e := newEngine(t, Config{Paths: []string{dir}, Query: tc.query})
			d, err := e.Authorize(context.Background(), newRequest(t, "blue"))
			if err != nil {
				t.Fatal(err)
			}
			assertDenied(t, d, tc.wantCode, tc.wantMsg)
		})
	}
}

func assertDenied(t *testing.T, d pipeline.Decision, code, msg string) {
	t.Helper()
	if d.Allowed || len(d.Reasons) != 1 || d.Reasons[0].Code != code {
		t.Fatalf("decision %+v, want a denial with code %s", d, code)
	}
	if !strings.Contains(d.Reasons[0].Message, msg) {
		t.Fatalf("reason %q does not mention %q", d.Reasons[0].Message, msg)
	}
}

// slowPolicy iterates 10^10 times without allocating, so only cancellation
// can end it in reasonable time.
const slowPolicy = `package plexus.authz

decision := {"allowed": true, "reasons": []} if not slow

slow if {
	some i in numbers.range(1, 100000)
	some j in numbers.range(1, 100000)
	i * j == -1
}
`

// The deadline stops a policy that loops, and the engine stays usable:
// the second decision times out the same way.
func TestDeadlineDenies(t *testing.T) {
	dir := writeFiles(t, map[string]string{"slow.rego": slowPolicy})
	e := newEngine(t, Config{Paths: []string{dir}, Deadline: Duration(5 * time.Millisecond)})
	for range 2 {
		start := time.Now()
		d, err := e.Authorize(context.Background(), newRequest(t, "blue"))
		if err != nil {
			t.Fatal(err)
		}
		assertDenied(t, d, CodeTimeout, "did not finish within 5ms")
		if took := time.Since(start); took > time.Second {
			t.Fatalf("a 5ms deadline stopped the evaluation after %s", took)
		}
	}
}

func TestCallerCancellationDenies(t *testing.T) {
	dir := writeFiles(t, map[string]string{"slow.rego": slowPolicy})
	e := newEngine(t, Config{Paths: []string{dir}, Deadline: Duration(MaxDeadline)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := e.Authorize(ctx, newRequest(t, "blue"))
	if err != nil {
		t.Fatal(err)
	}
	assertDenied(t, d, CodeCancelled, "cancelled")
}

func TestUnusableRequestDenies(t *testing.T) {
	e := libraryEngine(t)
	d, err := e.Authorize(context.Background(), &pipeline.AuthorizeRequest{})
	if err == nil {
		t.Fatal("no error for a request without pod")
	}
	assertDenied(t, d, CodeInput, "lacks a pod")
}

// A value the lazy input cannot convert makes OPA panic mid-evaluation;
// the engine denies that attachment instead of crashing its process.
func TestPanicDuringEvaluationDenies(t *testing.T) {
	src := decisionPolicy(`{"allowed": input.pod.weird == 1, "reasons": [{"code": "x", "message": "x"}]}`)
	e := newEngine(t, Config{Paths: []string{writeFiles(t, map[string]string{"p.rego": src})}})
	d := e.Decide(context.Background(), map[string]any{"pod": map[string]any{"weird": make(chan int)}})
	if d.Allowed || codes(d) != CodeError || !strings.Contains(d.Reasons[0].Message, "panicked") {
		t.Fatalf("decision %+v, want a %s denial saying it panicked", d, CodeError)
	}
}

func TestLoadRefusesBadPolicies(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		wantErr []string
	}{
		{
			name:    "syntax error names file and line",
			files:   map[string]string{"bad.rego": "package plexus.authz\n\ndecision := {\"allowed\" true}\n"},
			wantErr: []string{"bad.rego:3", "rego_parse_error"},
		},
		{
			name:    "Rego v0 syntax is refused",
			files:   map[string]string{"v0.rego": "package plexus.authz\n\ndeny[msg] { msg := \"x\" }\n"},
			wantErr: []string{"v0.rego:3"},
		},
		{
			name:    "strict compile refuses unused variables",
			files:   map[string]string{"strict.rego": "package plexus.authz\n\ndecision := d if {\n\tx := 1\n\td := {\"allowed\": true}\n}\n"},
			wantErr: []string{"strict.rego:4", "x"},
		},
		{
			name:    "unknown file type named directly",
			files:   map[string]string{"policy.txt": "hello"},
			wantErr: []string{"policy.txt", "not a .rego"},
		},
		{
			name: "conflicting data files",
			files: map[string]string{
				"a.json": `{"plexus": {"config": {"x": 1}}}`,
				"b.yaml": "plexus:\n  config:\n    x: 2\n",
			},
			wantErr: []string{"a.json", "b.yaml"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			paths := []string{dir}
			if _, ok := tc.files["policy.txt"]; ok {
				paths = []string{filepath.Join(dir, "policy.txt")}
			}
			_, err := New(context.Background(), Config{Paths: paths})
			if err == nil {
				t.Fatal("policy loaded")
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

// Every forbidden built-in is refused at load, naming the built-in, the
// file and the line of the call.
func TestForbiddenBuiltinsAreRefusedAtLoad(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(forbiddenBuiltins)) {
		t.Run(name, func(t *testing.T) {
			src := fmt.Sprintf("package plexus.authz\n\ndecision := {\"allowed\": true, \"reasons\": []} if {\n\t%s(1)\n}\n", name)
			dir := writeFiles(t, map[string]string{"uses.rego": src})
			_, err := New(context.Background(), Config{Paths: []string{dir}})
			if err == nil {
				t.Fatalf("policy calling %s loaded", name)
			}
			for _, s := range []string{"built-in " + name + " is forbidden", "uses.rego:4"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

// The compiler refuses the forbidden built-ins too, should a module reach
// it without passing checkForbidden.
func TestCapabilitiesLeaveOutForbiddenBuiltins(t *testing.T) {
	for _, b := range Capabilities().Builtins {
		if _, bad := forbiddenBuiltins[b.Name]; bad {
			t.Errorf("capabilities still declare %s", b.Name)
		}
	}
	if len(Capabilities().Builtins) == 0 {
		t.Fatal("capabilities declare no built-ins")
	}
}

// A new OPA release that adds a nondeterministic built-in must make this
// test fail until the table says whether plexus allows it.
func TestForbiddenCoversNondeterministic(t *testing.T) {
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		if _, ok := forbiddenBuiltins[b.Name]; b.Nondeterministic && !ok {
			t.Errorf("OPA marks %s nondeterministic but it is not forbidden", b.Name)
		}
	}
}

func TestConfigDecoding(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		want    Config
		wantErr string
	}{
		{
			name: "defaults fill query, deadline and evaluator",
			json: `{"paths": ["/etc/plexus/policy"]}`,
			want: Config{Paths: []string{"/etc/plexus/policy"}, Query: DefaultQuery, Deadline: Duration(DefaultDeadline), Evaluator: EvaluatorTopdown},
		},
		{
			name: "explicit query, deadline and evaluator are kept",
			json: `{"paths": ["p"], "query": "data.x.d", "deadline": "20ms", "evaluator": "topdown"}`,
			want: Config{Paths: []string{"p"}, Query: "data.x.d", Deadline: Duration(20 * time.Millisecond), Evaluator: EvaluatorTopdown},
		},
		{
			name: "evaluator auto is topdown",
			json: `{"paths": ["p"], "evaluator": "auto"}`,
			want: Config{Paths: []string{"p"}, Query: DefaultQuery, Deadline: Duration(DefaultDeadline), Evaluator: EvaluatorTopdown},
		},
		{
			name: "evaluator wasm is refused, saying what to do", json: `{"paths": ["p"], "evaluator": "wasm"}`,
			wantErr: `"evaluator": "wasm" is no longer supported: plexus evaluates policies with OPA's topdown; remove the key`,
		},
		{
			name: "unknown evaluator is refused, saying what to do", json: `{"paths": ["p"], "evaluator": "jit"}`,
			wantErr: `"evaluator": "jit" is not supported: plexus evaluates policies with OPA's topdown; remove the key`,
		},
		{
			name: "evaluator names are case-sensitive", json: `{"paths": ["p"], "evaluator": "Topdown"}`,
			wantErr: `"evaluator": "Topdown" is not supported`,
		},
		{name: "deadline without unit is refused", json: `{"paths": ["p"], "deadline": 20}`, wantErr: `"deadline": 20 is not a duration string`},
		{name: "unparsable deadline is refused", json: `{"paths": ["p"], "deadline": "soon"}`, wantErr: `"deadline": "soon" is not a duration`},
		{name: "negative deadline is refused", json: `{"paths": ["p"], "deadline": "-1s"}`, wantErr: `"deadline": "-1s" must be positive`},
		{name: "zero deadline is refused", json: `{"paths": ["p"], "deadline": "0s"}`, wantErr: `"deadline": "0s" must be positive`},
		{name: "huge deadline is refused", json: `{"paths": ["p"], "deadline": "1h"}`, wantErr: `"deadline": "1h0m0s" is outside (0, 10s]`},
		{name: "no paths is refused", json: `{}`, wantErr: "paths"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			err := config.Unmarshal([]byte(tc.json), &c)
			if err == nil {
				c, err = c.withDefaults()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(c) != fmt.Sprint(tc.want) {
				t.Fatalf("got %+v, want %+v", c, tc.want)
			}
		})
	}
}

func TestDurationRoundTrips(t *testing.T) {
	b, err := json.Marshal(Config{Paths: []string{"p"}, Deadline: Duration(75 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if time.Duration(c.Deadline) != 75*time.Millisecond {
		t.Fatalf("%s decoded as %v", b, time.Duration(c.Deadline))
	}
}

// One engine serves every ADD of the node at once (plexusd); concurrent
// decisions must not interfere.
func TestConcurrentDecisionsAgree(t *testing.T) {
	e := libraryEngine(t)
	allowed := newRequest(t, "blue")
	denied := newRequest(t, "team-b/blue")
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			req, want := allowed, true
			if i%2 == 1 {
				req, want = denied, false
			}
			for range 20 {
				d, err := e.Authorize(context.Background(), req)
				if err != nil || d.Allowed != want {
					errs <- fmt.Errorf("goroutine %d: %+v %v, want allowed=%v", i, d, err, want)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// The engine asks for, and builds, only the costly parts of the input a
// policy may read; every way of reaching them counts.
func TestInputUse(t *testing.T) {
	all := inputUse{true, true, true}
	tests := []struct {
		name    string
		imports string
		body    string
		want    inputUse
	}{
		{name: "pod fields only", body: `input.pod.name == "x"`},
		{name: "namespace name only", body: `input.namespace.name == "x"`},
		{name: "namespace labels", body: `input.namespace.labels.team == "x"`, want: inputUse{namespaceLabels: true}},
		{name: "whole namespace object", body: `count(input.namespace) > 0`, want: inputUse{namespaceLabels: true}},
		{name: "NAD name only", body: `input.nad.name == "x"`},
		{name: "NAD config", body: `"bridge" in input.nad.config.plugins`, want: inputUse{nadConfig: true}},
		{name: "whole NAD", body: `count(input.nad) > 0`, want: inputUse{nadConfig: true}},
		{name: "this selection only", body: `input.selection.mac`},
		{name: "all selections", body: `count(input.selections) > 1`, want: inputUse{selections: true}},
		{name: "dynamic key under input", body: `some k; input[k].labels`, want: inputUse{namespaceLabels: true, selections: true}},
		{name: "whole input", body: `count(input) > 0`, want: all},
		{name: "input as a value", body: `x := input; x.pod`, want: all},
		{name: "import of a part", imports: "import input.nad as n\n", body: `n.config`, want: inputUse{nadConfig: true}},
		{name: "import of a part, other fields", imports: "import input.nad as n\n", body: `n.name`},
		{name: "import without alias", imports: "import input.selections\n", body: `count(selections) > 0`, want: inputUse{selections: true}},
		{name: "reference inside brackets", body: `data.x[input.namespace.labels.a]`, want: inputUse{namespaceLabels: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "package plexus.authz\n\n" + tc.imports + "\ndecision := {\"allowed\": true, \"reasons\": []} if {\n\t" + tc.body + "\n}\n"
			e := newEngine(t, Config{Paths: []string{writeFiles(t, map[string]string{"p.rego": src})}})
			if e.use != tc.want {
				t.Fatalf("input use %+v, want %+v", e.use, tc.want)
			}
			if e.NeedsNamespaceLabels() != tc.want.namespaceLabels {
				t.Fatalf("NeedsNamespaceLabels() = %v", e.NeedsNamespaceLabels())
			}
		})
	}
	lib := libraryEngine(t)
	if want := (inputUse{selections: true}); lib.use != want {
		t.Errorf("the library's input use %+v, want %+v (max_attachments counts the selections)", lib.use, want)
	}
}

// A query that reads input counts as much as a module.
func TestInputUseOfTheQuery(t *testing.T) {
	src := decisionPolicy(`{"allowed": true, "reasons": []}`)
	e := newEngine(t, Config{Paths: []string{writeFiles(t, map[string]string{"p.rego": src})},
		Query: `data.plexus.authz.decision with input.x as input.nad.config`})
	if !e.use.nadConfig {
		t.Errorf("input use %+v misses the query's read of input.nad.config", e.use)
	}
}
