package install

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
)

// saJWT is a token shaped like a projected ServiceAccount token: only its
// subject is read, never its signature.
func saJWT(sub, id string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(`{"sub":"`+sub+`","jti":"`+id+`"}`)) + ".sig"
}

// tokenAPI is a fake API server's TokenRequest: it records each request and
// grants the requested lifetime from the test's clock, or fails with err.
type tokenAPI struct {
	now      *time.Time
	err      error
	requests []k8stesting.CreateActionImpl
	grant    time.Duration // 0: as requested
}

func (a *tokenAPI) client() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "serviceaccounts", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "token" {
			return false, nil, nil
		}
		ca := action.(k8stesting.CreateActionImpl)
		a.requests = append(a.requests, ca)
		if a.err != nil {
			return true, nil, a.err
		}
		req := ca.Object.(*authnv1.TokenRequest)
		life := time.Duration(*req.Spec.ExpirationSeconds) * time.Second
		if a.grant != 0 {
			life = a.grant
		}
		out := req.DeepCopy()
		out.Status = authnv1.TokenRequestStatus{
			Token:               fmt.Sprintf("node-token-%d", len(a.requests)),
			ExpirationTimestamp: metav1.NewTime(a.now.Add(life)),
		}
		return true, out, nil
	})
	return c
}

// tokenNode is a node whose installer has a fake API client and clock.
func tokenNode(t *testing.T, api *tokenAPI) (*node, *Installer, *time.Time) {
	t.Helper()
	n := newNode(t)
	n.write(n.token, saJWT("system:serviceaccount:kube-system:plexus", "pod-1")+"\n")
	o := n.options()
	o.NodeName, o.Client = "node-a", api.client()
	in, err := New(o)
	must(t, err)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	api.now = &now
	in.now = func() time.Time { return now }
	return n, in, &now
}

// kubeconfigToken is the token the plugin would read.
func (n *node) kubeconfigToken() string {
	n.t.Helper()
	kc, err := clientcmd.LoadFromFile(n.kubeconfig)
	must(n.t, err)
	return kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo].Token
}

func TestKubeconfigCarriesANodeBoundToken(t *testing.T) {
	api := &tokenAPI{}
	n, in, _ := tokenNode(t, api)
	must(t, in.Reconcile(t.Context()))
	if got := n.kubeconfigToken(); got != "node-token-1" {
		t.Errorf("kubeconfig token %q, want the node-bound one", got)
	}
	if len(api.requests) != 1 {
		t.Fatalf("%d TokenRequests, want 1", len(api.requests))
	}
	r := api.requests[0]
	if r.Namespace != "kube-system" || r.Name != "plexus" || r.Resource != (schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}) {
		t.Errorf("TokenRequest for %s %s/%s, want serviceaccounts kube-system/plexus (the installer's own)", r.Resource, r.Namespace, r.Name)
	}
	spec := r.Object.(*authnv1.TokenRequest).Spec
	if ref := spec.BoundObjectRef; ref == nil || ref.Kind != "Node" || ref.APIVersion != "v1" || ref.Name != "node-a" {
		t.Errorf("bound object %+v, want Node node-a", ref)
	}
	if spec.ExpirationSeconds == nil || *spec.ExpirationSeconds != int64(DefaultTokenTTL/time.Second) {
		t.Errorf("expirationSeconds %v, want %d", spec.ExpirationSeconds, int64(DefaultTokenTTL/time.Second))
	}
	if len(spec.Audiences) != 0 {
		t.Errorf("audiences %v, want the API server's own (none given)", spec.Audiences)
	}
	if fi, err := os.Stat(n.kubeconfig); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode: %v %v, want 0600", fi.Mode(), err)
	}
}

// The token is renewed at 80% of the lifetime the server granted (not the
// one asked for), and when kubelet rotates the pod's token; not on every
// pass.
func TestNodeTokenRefresh(t *testing.T) {
	api := &tokenAPI{grant: 50 * time.Minute}
	n, in, now := tokenNode(t, api)
	must(t, in.Reconcile(t.Context()))
	steps := []struct {
		advance  time.Duration
		rotate   bool
		requests int
		token    string
	}{
		{advance: time.Minute, requests: 1, token: "node-token-1"},
		{advance: 38 * time.Minute, requests: 1, token: "node-token-1"}, // 39m < 40m
		{advance: time.Minute, requests: 2, token: "node-token-2"},      // 40m = 80% of 50m
		{advance: time.Minute, requests: 2, token: "node-token-2"},
		{rotate: true, requests: 3, token: "node-token-3"},
		{advance: 39 * time.Minute, requests: 3, token: "node-token-3"},
		{advance: time.Minute, requests: 4, token: "node-token-4"},
	}
	for i, s := range steps {
		*now = now.Add(s.advance)
		if s.rotate {
			n.write(n.token, saJWT("system:serviceaccount:kube-system:plexus", fmt.Sprint("rotated-", i)))
		}
		must(t, in.Reconcile(t.Context()))
		if len(api.requests) != s.requests || n.kubeconfigToken() != s.token {
			t.Errorf("step %d: %d requests, token %q; want %d, %q", i, len(api.requests), n.kubeconfigToken(), s.requests, s.token)
		}
	}
}

// Without the RBAC (or on a server that cannot bind tokens to Nodes) the
// kubeconfig carries the pod's token, and TokenRequest is retried a minute
// later, not every pass.
func TestNodeTokenFallsBackToThePodToken(t *testing.T) {
	api := &tokenAPI{err: apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "plexus", errors.New("RBAC"))}
	n, in, now := tokenNode(t, api)
	pod, err := os.ReadFile(n.token)
	must(t, err)
	must(t, in.Reconcile(t.Context()))
	if got := n.kubeconfigToken(); got+"\n" != string(pod) {
		t.Errorf("kubeconfig token %q, want the pod's", got)
	}
	*now = now.Add(30 * time.Second)
	must(t, in.Reconcile(t.Context()))
	if len(api.requests) != 1 {
		t.Errorf("%d TokenRequests within the retry interval, want 1", len(api.requests))
	}
	api.err = nil
	*now = now.Add(30 * time.Second)
	must(t, in.Reconcile(t.Context()))
	if got := n.kubeconfigToken(); len(api.requests) != 2 || got != "node-token-2" {
		t.Errorf("after the retry interval: %d requests, token %q; want 2, the node token", len(api.requests), got)
	}
}

// A failed renewal keeps the node token while it is valid; only once it
// has expired does the kubeconfig fall back to the pod's.
func TestNodeTokenKeptWhileValidWhenRenewalFails(t *testing.T) {
	api := &tokenAPI{grant: 10 * time.Minute}
	n, in, now := tokenNode(t, api)
	must(t, in.Reconcile(t.Context()))
	api.err = apierrors.NewServiceUnavailable("apiserver restarting")
	*now = now.Add(9 * time.Minute)
	must(t, in.Reconcile(t.Context()))
	if got := n.kubeconfigToken(); got != "node-token-1" {
		t.Errorf("renewal failed with the token still valid: kubeconfig has %q, want node-token-1", got)
	}
	*now = now.Add(time.Minute)
	must(t, in.Reconcile(t.Context()))
	if got := n.kubeconfigToken(); got == "node-token-1" || len(api.requests) != 3 {
		t.Errorf("expired node token: kubeconfig has %q after %d requests, want the pod's after 3", got, len(api.requests))
	}
}

func TestNoNodeNameUsesThePodToken(t *testing.T) {
	api := &tokenAPI{}
	n := newNode(t)
	o := n.options()
	o.Client = api.client()
	in, err := New(o)
	must(t, err)
	must(t, in.Reconcile(t.Context()))
	if got := n.kubeconfigToken(); got != "token-1" || len(api.requests) != 0 {
		t.Errorf("no node name: token %q after %d TokenRequests, want token-1 and none", got, len(api.requests))
	}
}

func TestServiceAccountOf(t *testing.T) {
	for _, tc := range []struct {
		name, token, ns, sa string
		wantErr             bool
	}{
		{name: "service account", token: saJWT("system:serviceaccount:kube-system:plexus", "x"), ns: "kube-system", sa: "plexus"},
		{name: "not a JWT", token: "token-1", wantErr: true},
		{name: "claims not base64", token: "a.!!.c", wantErr: true},
		{name: "a user", token: saJWT("alice", "x"), wantErr: true},
		{name: "empty name", token: saJWT("system:serviceaccount:kube-system:", "x"), wantErr: true},
		{name: "node", token: saJWT("system:node:node-a", "x"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, sa, err := serviceAccountOf(tc.token)
			if (err != nil) != tc.wantErr || ns != tc.ns || sa != tc.sa {
				t.Errorf("serviceAccountOf = %q, %q, %v; want %q, %q, error %v", ns, sa, err, tc.ns, tc.sa, tc.wantErr)
			}
		})
	}
}
