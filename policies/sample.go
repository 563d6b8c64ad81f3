package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
)

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
