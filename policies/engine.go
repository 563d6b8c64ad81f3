package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
)

// Reason codes of the engine's own denials when the policy gives no usable
// answer (fail closed, s7.4); library rules' codes lack the "policy." prefix.
const (
	CodeUndefined = "policy.undefined" // the query has no value
	CodeMalformed = "policy.malformed" // the value is not a decision
	CodeError     = "policy.error"     // evaluation failed
	CodeTimeout   = "policy.timeout"   // the deadline expired
	CodeCancelled = "policy.cancelled" // the caller gave up
	CodeInput     = "policy.input"     // the request could not become an input document
)

// Engine is a compiled policy, safe for concurrent use: plexusd keeps
// one, the thin plugin compiles one per ADD.
type Engine struct {
	query    rego.PreparedEvalQuery
	queryStr string
	deadline time.Duration
	use      inputUse
}

var _ pipeline.Authorizer = (*Engine)(nil)

// New loads and compiles the policy once, into a query prepared for OPA's
// topdown evaluator. Rego v1 syntax, strict compile, forbidden built-ins
// refused (capabilities.go); built-in errors abort the evaluation instead
// of making an expression silently undefined, since an undefined deny rule
// would let a request through.
func New(ctx context.Context, cfg Config) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	query, err := parseQuery(cfg.Query)
	if err != nil {
		return nil, err
	}
	loaded, err := loadForQuery(cfg.Paths, query)
	if err != nil {
		return nil, err
	}
	opts := []func(*rego.Rego){
		rego.Query(cfg.Query),
		rego.Store(inmem.NewFromObjectWithOpts(loaded.Data, inmem.OptReturnASTValuesOnRead(true))),
		rego.Capabilities(Capabilities()),
		rego.SetRegoVersion(ast.RegoV1),
		rego.Strict(true),
		rego.StrictBuiltinErrors(true),
	}
	for _, m := range loaded.Modules {
		opts = append(opts, rego.ParsedModule(m))
	}
	pq, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("compiling policy from %s: %w", strings.Join(cfg.Paths, ", "), err)
	}
	return &Engine{
		query: pq, queryStr: cfg.Query, deadline: time.Duration(cfg.Deadline),
		use: inputUseOf(loaded.Modules, query),
	}, nil
}

// Authorize makes the s7.4 decision for one attachment. Policy failures are
// denials with a policy.* reason, so the pod's owner always learns why; the
// error is set only when the request itself is unusable (a denial too).
func (e *Engine) Authorize(ctx context.Context, req *pipeline.AuthorizeRequest) (pipeline.Decision, error) {
	input, err := buildInput(req, e.use)
	if err != nil {
		return deny(CodeInput, "could not build the policy input: "+err.Error()), err
	}
	return e.Decide(ctx, input), nil
}

// Decide evaluates the policy over an input document built by BuildInput.
// OPA converts only the parts the policy reads (a lazy object): converting
// the whole document up front was most of the cost of a simple decision.
func (e *Engine) Decide(ctx context.Context, input map[string]any) (d pipeline.Decision) {
	// The lazy input panics on a value it cannot convert; fail closed for
	// this attachment rather than take plexusd down.
	defer func() {
		if r := recover(); r != nil {
			d = deny(CodeError, fmt.Sprintf("policy query %s failed: evaluation panicked: %v", e.queryStr, r))
		}
	}()
	// rego cancels the evaluation when ctx ends (topdown.Cancel), so the
	// deadline stops a policy that loops.
	ctx, cancel := context.WithTimeout(ctx, e.deadline)
	defer cancel()
	rs, err := e.query.Eval(ctx, rego.EvalParsedInput(ast.LazyObject(input)))
	if err != nil {
		return e.evalFailure(ctx, err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return deny(CodeUndefined, fmt.Sprintf("policy query %s is undefined for this attachment", e.queryStr))
	}
	if len(rs) > 1 {
		return deny(CodeMalformed, fmt.Sprintf("policy query %s has %d results; it must have one", e.queryStr, len(rs)))
	}
	dec, err := parseDecision(rs[0].Expressions[0].Value)
	if err != nil {
		return deny(CodeMalformed, fmt.Sprintf("policy query %s: %v", e.queryStr, err))
	}
	return dec
}

// evalFailure says why evaluation stopped; ctx is the deadline context.
func (e *Engine) evalFailure(ctx context.Context, err error) pipeline.Decision {
	if topdown.IsCancel(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return deny(CodeTimeout, fmt.Sprintf("policy query %s did not finish within %s", e.queryStr, e.deadline))
		}
		return deny(CodeCancelled, fmt.Sprintf("policy query %s was cancelled: %v", e.queryStr, err))
	}
	return deny(CodeError, fmt.Sprintf("policy query %s failed: %v", e.queryStr, err))
}

func deny(code, msg string) pipeline.Decision {
	return pipeline.Decision{Allowed: false, Reasons: []pipeline.Reason{{Code: code, Message: msg}}}
}

// parseDecision checks the documented decision shape:
// {"allowed": bool, "reasons": [{"code": string, "message": string}, ...]}.
// A denial without a reason is malformed: the pod's owner must learn why.
func parseDecision(v any) (pipeline.Decision, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return pipeline.Decision{}, fmt.Errorf("decision is %T, not an object", v)
	}
	allowed, ok := obj["allowed"].(bool)
	if !ok {
		return pipeline.Decision{}, fmt.Errorf("decision.allowed is missing or not a boolean")
	}
	reasons, err := parseReasons(obj["reasons"])
	if err != nil {
		return pipeline.Decision{}, err
	}
	if !allowed && len(reasons) == 0 {
		return pipeline.Decision{}, fmt.Errorf("decision denies without a reason")
	}
	return pipeline.Decision{Allowed: allowed, Reasons: reasons}, nil
}

func parseReasons(v any) ([]pipeline.Reason, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("decision.reasons is %T, not an array", v)
	}
	out := make([]pipeline.Reason, 0, len(list))
	for i, r := range list {
		obj, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("decision.reasons[%d] is %T, not an object", i, r)
		}
		code, _ := obj["code"].(string)
		msg, _ := obj["message"].(string)
		if code == "" || msg == "" {
			return nil, fmt.Errorf("decision.reasons[%d] needs a non-empty string code and message", i)
		}
		out = append(out, pipeline.Reason{Code: code, Message: msg})
	}
	return out, nil
}

// NeedsNamespaceLabels says whether any loaded module could read
// input.namespace.labels (a dynamic key under input counts), so that the
// caller fetches them (an API call in thin mode) only when needed.
func (e *Engine) NeedsNamespaceLabels() bool { return e.use.namespaceLabels }

// sampleConfig is the sample attachment's network: one bridge.
const sampleConfig = `{"cniVersion":"1.0.0","name":"sample","type":"bridge","ipam":{"type":"host-local","subnet":"10.99.0.0/24"}}`

// SampleRequest is a fixed, ordinary attachment (sample/sample-0 selecting
// sample/sample-net as net1) on which a node times a new policy.
func SampleRequest() *pipeline.AuthorizeRequest {
	const annotation = `[{"name":"sample-net","interface":"net1"}]`
	pod := &source.Pod{
		Namespace: "sample", Name: "sample-0", UID: "00000000-0000-4000-8000-000000000000",
		Labels:             map[string]string{"app": "sample"},
		Annotations:        map[string]string{selection.Annotation: annotation},
		ServiceAccountName: "default", NodeName: "sample-node",
	}
	res, err := selection.Parse(annotation, pod.Namespace)
	if err != nil || len(res.Elements) != 1 {
		panic(fmt.Sprintf("policies: the sample annotation does not parse: %v", err))
	}
	el := res.Elements[0]
	return &pipeline.AuthorizeRequest{
		Pod:             pod,
		NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": "sample"},
		Selections:      res.Elements,
		Attachment: &pipeline.Attachment{
			Index: el.Index, Origin: pipeline.OriginSelection, Selection: el, Name: el.Ref(), IfName: "net1",
			NAD: &nad.NetworkAttachmentDefinition{
				TypeMeta:   metav1.TypeMeta{APIVersion: nad.Group + "/" + nad.Version, Kind: nad.Kind},
				ObjectMeta: metav1.ObjectMeta{Namespace: "sample", Name: "sample-net"},
				Spec:       nad.Spec{Config: sampleConfig},
			},
			Config: json.RawMessage(sampleConfig),
		},
	}
}

// TimeSample decides SampleRequest once and returns how long it took. It
// fails when the decision timed out or was unusable: such a policy would
// deny every attachment it is asked about.
func (e *Engine) TimeSample(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	d, err := e.Authorize(ctx, SampleRequest())
	took := time.Since(start)
	if err != nil {
		return took, fmt.Errorf("deciding a sample attachment: %w", err)
	}
	for _, r := range d.Reasons {
		switch r.Code {
		case CodeTimeout, CodeError, CodeUndefined, CodeMalformed:
			return took, fmt.Errorf("deciding a sample attachment: %s: %s", r.Code, r.Message)
		}
	}
	return took, nil
}
