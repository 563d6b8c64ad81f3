package push

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
)

func node(name string, pol *plexusapi.NodePolicy) *plexusapi.PlexusNode {
	return &plexusapi.PlexusNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: plexusapi.PlexusNodeStatus{Policy: pol}}
}

func TestSummaryGroupsNodesByWhatTheyEnforce(t *testing.T) {
	p := &plexusapi.AttachmentPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster", Generation: 3}}
	s := NewSummary(p)
	for i := range 25 {
		s.Add(node(fmt.Sprintf("cur-%02d", i), &plexusapi.NodePolicy{Source: "object", Object: "cluster", Generation: 3, ObservedGeneration: 3, Revision: "3-new"}))
	}
	s.Add(node("refused", &plexusapi.NodePolicy{Source: "object", Object: "cluster", Generation: 2, ObservedGeneration: 3, Revision: "2-old", Error: "team.rego:1: rego_parse_error\nmore"}))
	s.Add(node("behind", &plexusapi.NodePolicy{Source: "object", Object: "cluster", Generation: 2, ObservedGeneration: 2, Revision: "2-old"}))
	s.Add(node("other", &plexusapi.NodePolicy{Source: "object", Object: "team", Revision: "1-x"}))
	s.Add(node("files", &plexusapi.NodePolicy{Source: "files", Revision: "abc"}))
	s.Add(node("silent", nil))

	if s.Current != 25 || len(s.Refused) != 1 || len(s.Behind) != 1 || len(s.Other) != 3 {
		t.Fatalf("current %d, refused %v, behind %v, other %v", s.Current, s.Refused, s.Behind, s.Other)
	}
	if s.Revisions["3-new"] != 25 || s.Revisions["2-old"] != 2 || len(s.Revisions) != 2 {
		t.Errorf("revisions %v", s.Revisions)
	}
	var out bytes.Buffer
	if err := s.Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"27 nodes follow it: 25 enforce generation 3, 1 refused it, 1 have not tried it yet",
		"refused (1):\n  refused: team.rego:1: rego_parse_error\n",
		"not yet tried (1):\n  behind: enforces generation 2, tried 2",
		"  other: follows AttachmentPolicy team", "  files: enforces its files policy", "  silent: reports no policy",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

func TestSummaryNamesABoundedNumberOfNodes(t *testing.T) {
	s := NewSummary(&plexusapi.AttachmentPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster", Generation: 2}})
	for i := range 100 {
		s.Add(node(fmt.Sprintf("n-%03d", i), &plexusapi.NodePolicy{Source: "object", Object: "cluster", Generation: 1, ObservedGeneration: 2, Error: "refused"}))
	}
	var out bytes.Buffer
	if err := s.Write(&out); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), ": refused\n"); got != maxListed {
		t.Errorf("%d nodes named, want %d", got, maxListed)
	}
	if !strings.Contains(out.String(), "and 80 more") {
		t.Errorf("the rest are not counted:\n%s", out.String())
	}
}
