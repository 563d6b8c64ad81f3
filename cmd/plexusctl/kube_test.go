package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/plexus-cni/plexus/core/codes"
)

// fakeAPI is an API server answering the Multus ConfigMap wherever it is
// asked for, an empty pod list, and 404 for the rest; it records the
// paths asked.
type fakeAPI struct {
	mu    sync.Mutex
	paths []string
}

const multusConfigMapJSON = `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"namespace":%q,"name":%q},
 "data":{"cni-conf.json":"{\"cniVersion\":\"0.3.1\",\"name\":\"multus-cni-network\",\"type\":\"multus\",\"clusterNetwork\":\"/etc/cni/net.d/10-flannel.conflist\"}"}}`

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.paths = append(f.paths, r.URL.Path)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) == 6 && parts[2] == "namespaces" && parts[4] == "configmaps":
		fmt.Fprintf(w, multusConfigMapJSON, parts[3], parts[5])
	case r.URL.Path == "/api/v1/pods":
		fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}
}

func (f *fakeAPI) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.paths
	f.paths = nil
	return out
}

// kubeconfig writes a kubeconfig for server whose context's namespace is
// context-ns, which no command should take for its own default.
func kubeconfig(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: fake, user: {token: t}}]
contexts: [{name: fake, context: {cluster: fake, user: fake, namespace: context-ns}}]
current-context: fake
`, server)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// newFakeAPI starts a fakeAPI; it returns its URL and a kubeconfig naming
// it.
func newFakeAPI(t *testing.T) (api *fakeAPI, server, kc string) {
	t.Helper()
	api = &fakeAPI{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return api, srv.URL, kubeconfig(t, srv.URL)
}

// migrate's -n/--namespace (the global flag) is the Multus ConfigMap's
// namespace; without it kube-system, whatever the context's namespace.
func TestMigrateNamespaceIsTheConfigMaps(t *testing.T) {
	api, _, kc := newFakeAPI(t)
	for _, tc := range []struct {
		name     string
		env      string // $KUBECONFIG
		args     []string
		want     string // the ConfigMap read
		wantPods bool
	}{
		{"default kube-system", "", []string{"migrate", "--kubeconfig", kc}, "kube-system/multus-cni-config", true},
		{"--namespace as before", "", []string{"migrate", "--kubeconfig", kc, "--namespace", "multus-system"}, "multus-system/multus-cni-config", true},
		{"-n and --configmap", "", []string{"migrate", "--kubeconfig", kc, "-n", "multus-system", "--configmap", "multus-daemon-config"}, "multus-system/multus-daemon-config", true},
		{"global flags before the command", "", []string{"--kubeconfig", kc, "-n", "multus-system", "migrate"}, "multus-system/multus-cni-config", true},
		{"$KUBECONFIG without flags", kc, []string{"migrate"}, "kube-system/multus-cni-config", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			code, stdout, stderr := runCtl(t, tc.args...)
			if code != codes.ExitOK || !strings.Contains(stdout, "Multus config: ConfigMap "+tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want the ConfigMap %s", code, stdout, stderr, tc.want)
			}
			ns, name, _ := strings.Cut(tc.want, "/")
			want := []string{"/api/v1/namespaces/" + ns + "/configmaps/" + name, "/api/v1/pods"}
			if got := api.asked(); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("asked %v, want %v", got, want)
			}
		})
	}
}

// With --from, migrate reads the cluster only when a connection flag is
// given, as with --kubeconfig before; $KUBECONFIG alone does not.
func TestMigrateFromAFileConnectsOnlyWhenAsked(t *testing.T) {
	api, _, kc := newFakeAPI(t)
	from := filepath.Join(t.TempDir(), "multus.conf")
	if err := os.WriteFile(from, []byte(`{"type":"multus","name":"m","clusterNetwork":"/x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want []string
	}{
		{"offline", "", []string{"migrate", "--from", from}, nil},
		{"$KUBECONFIG is not asking", kc, []string{"migrate", "--from", from}, nil},
		{"-n is not asking", "", []string{"migrate", "--from", from, "-n", "x"}, nil},
		{"--kubeconfig lists the pods", "", []string{"migrate", "--from", from, "--kubeconfig", kc}, []string{"/api/v1/pods"}},
		{"--context lists the pods", kc, []string{"migrate", "--from", from, "--context", "fake"}, []string{"/api/v1/pods"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			if code, _, stderr := runCtl(t, tc.args...); code != codes.ExitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got := api.asked(); strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("asked %v, want %v", got, tc.want)
			}
		})
	}
}

// explain pod -f needs no cluster unless --kubeconfig (or another
// connection flag) is given or $KUBECONFIG is set, as before.
func TestExplainManifestConnectsOnlyWhenAClusterIsNamed(t *testing.T) {
	api, _, kc := newFakeAPI(t)
	dir := t.TempDir()
	pod := filepath.Join(dir, "pod.yaml")
	nad := filepath.Join(dir, "nad.yaml")
	if err := os.WriteFile(pod, []byte("kind: Pod\nmetadata:\n  name: web\n  annotations:\n    k8s.v1.cni.cncf.io/networks: blue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nad, []byte("kind: NetworkAttachmentDefinition\nmetadata:\n  name: blue\nspec:\n  config: '{\"cniVersion\":\"1.0.0\",\"type\":\"bridge\"}'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	manifest := []string{"explain", "pod", "-f", pod, "--nad", nad}
	for _, tc := range []struct {
		name    string
		env     string
		args    []string
		connect bool
	}{
		{"no kubeconfig", "", nil, false},
		{"-n alone", "", []string{"-n", "team-a"}, false},
		{"--kubeconfig", "", []string{"--kubeconfig", kc}, true},
		{"$KUBECONFIG", kc, nil, true},
		{"--context, with $KUBECONFIG", kc, []string{"--context", "fake"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			code, stdout, stderr := runCtl(t, append(append([]string{}, manifest...), tc.args...)...)
			if code == codes.ExitUsage {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got := len(api.asked()) > 0; got != tc.connect {
				t.Errorf("asked the API: %v, want %v\nstdout:\n%s\nstderr:\n%s", got, tc.connect, stdout, stderr)
			}
		})
	}
}

// policy status connects through the same flags: the kubeconfig, and
// kubectl's overrides of it.
func TestPolicyStatusUsesTheConnectionFlags(t *testing.T) {
	api, server, kc := newFakeAPI(t)
	t.Setenv("KUBECONFIG", "")
	dead := kubeconfig(t, "https://127.0.0.1:1")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"--kubeconfig", []string{"--kubeconfig", kc}},
		{"--server overrides the kubeconfig's", []string{"--kubeconfig", dead, "--server", server}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCtl(t, append([]string{"policy", "status", "--name", "team"}, tc.args...)...)
			got := api.asked()
			if code != codes.ExitFail || len(got) != 1 || !strings.HasSuffix(got[0], "/attachmentpolicies/team") {
				t.Fatalf("exit %d, asked %v, stderr %q; want 1 (not found) after asking for AttachmentPolicy team", code, got, stderr)
			}
		})
	}
	code, _, stderr := runCtl(t, "policy", "status", "--kubeconfig", "/nonexistent/kubeconfig")
	if code != codes.ExitFail || !strings.Contains(stderr, "kubeconfig /nonexistent/kubeconfig") {
		t.Errorf("exit %d, stderr %q; want 1 naming the kubeconfig", code, stderr)
	}
}
