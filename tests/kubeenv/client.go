package kubeenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/plexus-cni/plexus/core/nad"
)

// FieldManager is the server-side-apply field manager Apply uses.
const FieldManager = "plexus-e2e"

// Kubeconfig writes a kubeconfig file at path that connects with cfg
// (typically AdminConfig or ServiceAccountConfig). Inline credentials are
// embedded; file references are kept as paths.
func (e *Env) Kubeconfig(path string, cfg *rest.Config) error {
	const name = "kubeenv"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		CertificateAuthority:     cfg.CAFile,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		ClientCertificate:     cfg.CertFile,
		ClientKey:             cfg.KeyFile,
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// ServiceAccountConfig returns a client configuration authenticating as the
// ServiceAccount namespace/name with a token from the TokenRequest API, as a
// kubelet-projected token would. The ServiceAccount must exist.
func (e *Env) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(e.AdminConfig())
	if err != nil {
		return nil, fmt.Errorf("admin clientset: %w", err)
	}
	expiry := int64(time.Hour / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}},
		metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return &rest.Config{
		Host:            e.host,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.pki.caPEM},
	}, nil
}

// NodeServiceAccountConfig is ServiceAccountConfig with the token bound to
// the Node named node, created when missing, as the installer's token is:
// the API server then names that node in the caller's
// authentication.kubernetes.io/node-name.
func (e *Env) NodeServiceAccountConfig(ctx context.Context, namespace, name, node string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(e.AdminConfig())
	if err != nil {
		return nil, fmt.Errorf("admin clientset: %w", err)
	}
	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		n, err = cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	expiry := int64(time.Hour / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &expiry,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: n.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request token for ServiceAccount %s/%s bound to Node %s: %w", namespace, name, node, err)
	}
	return &rest.Config{
		Host:            e.host,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.pki.caPEM},
	}, nil
}

// Apply server-side applies every YAML document of every file, in order, as
// field manager FieldManager with conflicts forced (fixtures own what they
// declare). With dryRun the server validates and admits but stores nothing.
//
// A CustomResourceDefinition applied (not dry-run) is waited for until it
// is Established, so later documents may be of its kind. Namespaced objects
// without a namespace go to "default".
func (e *Env) Apply(ctx context.Context, dryRun bool, files ...string) error {
	cfg := e.AdminConfig()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	a := &applier{
		dyn:     dyn,
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		dryRun:  dryRun,
		created: map[schema.GroupKind]bool{},
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		if err := a.applyStream(ctx, f, data); err != nil {
			return err
		}
	}
	return nil
}

type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	dryRun bool
	// created holds the kinds defined by CRDs this call established, the
	// only kinds worth waiting for in discovery.
	created map[schema.GroupKind]bool
}

func (a *applier) applyStream(ctx context.Context, file string, data []byte) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for doc := 1; ; doc++ {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("apply %s document %d: decode: %w", file, doc, err)
		}
		if len(obj.Object) == 0 { // an empty document, e.g. between two ---
			continue
		}
		if err := a.apply(ctx, &obj); err != nil {
			return fmt.Errorf("apply %s document %d (%s %s): %w", file, doc, obj.GetKind(), objName(&obj), err)
		}
	}
}

func objName(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetName()
}

func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return errors.New("document has no apiVersion or kind")
	}
	mapping, err := a.restMapping(ctx, gvk)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(metav1.NamespaceDefault)
		}
		ri = a.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: &force}
	if a.dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	applied, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
	if err != nil {
		return err
	}
	if !a.dryRun && gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition" {
		return a.waitEstablished(ctx, ri, applied)
	}
	return nil
}

func (a *applier) restMapping(ctx context.Context, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	for {
		m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil {
			return m, nil
		}
		if !meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("map %s to a resource: %w", gvk, err)
		}
		// Discovery is cached; a kind may be newer than the cache.
		a.mapper.Reset()
		if m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			return m, nil
		}
		if !a.created[gvk.GroupKind()] {
			return nil, fmt.Errorf("map %s to a resource (is its CRD applied?): %w", gvk, err)
		}
		// Established can precede the kind's appearance in discovery.
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("map %s to a resource: %w", gvk, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitEstablished waits until the CRD's Established condition is True.
func (a *applier) waitEstablished(ctx context.Context, ri dynamic.ResourceInterface, crd *unstructured.Unstructured) error {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	a.created[schema.GroupKind{Group: group, Kind: kind}] = true
	for {
		if established(crd) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for CRD %s to be Established: %w", crd.GetName(), context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
		var err error
		if crd, err = ri.Get(ctx, crd.GetName(), metav1.GetOptions{}); err != nil {
			return fmt.Errorf("wait for CRD to be Established: %w", err)
		}
	}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// RequestCounts scrapes kube-apiserver's apiserver_request_total and sums it
// by "VERB resource subresource" (empty parts left out, so "GET pods",
// "PATCH pods status", "APPLY network-attachment-definitions"), over all
// groups, versions, scopes, codes and dry-run values. Verbs are as the
// server records them: GET, LIST, WATCH, POST, PUT, PATCH, APPLY, DELETE.
// A request is counted as it completes, which can be just after its client
// has the response, so a test diffing counts should scrape until the
// expected growth shows (and then check it is not more).
func (e *Env) RequestCounts(ctx context.Context) (map[string]float64, error) {
	families, err := e.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	fam, ok := families["apiserver_request_total"]
	if !ok {
		return nil, errors.New("kube-apiserver /metrics has no apiserver_request_total")
	}
	counts := map[string]float64{}
	for _, m := range fam.GetMetric() {
		counts[requestKey(m)] += m.GetCounter().GetValue()
	}
	return counts, nil
}

// Metrics scrapes the API server's /metrics, by family name.
func (e *Env) Metrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	cs, err := kubernetes.NewForConfig(e.AdminConfig())
	if err != nil {
		return nil, fmt.Errorf("admin clientset: %w", err)
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").
		SetHeader("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain))).
		DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scrape kube-apiserver /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parse kube-apiserver /metrics: %w", err)
	}
	return families, nil
}

func requestKey(m *dto.Metric) string {
	var verb, resource, subresource string
	for _, l := range m.GetLabel() {
		switch l.GetName() {
		case "verb":
			verb = l.GetValue()
		case "resource":
			resource = l.GetValue()
		case "subresource":
			subresource = l.GetValue()
		}
	}
	parts := []string{verb}
	for _, p := range []string{resource, subresource} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " ")
}

// NADs is the NetworkAttachmentDefinition resource of a dynamic client.
func NADs(dyn dynamic.Interface) dynamic.NamespaceableResourceInterface {
	return dyn.Resource(schema.GroupVersionResource{Group: nad.Group, Version: nad.Version, Resource: nad.Resource})
}

// CreateNAD creates a NetworkAttachmentDefinition whose spec.config is config.
func CreateNAD(ctx context.Context, dyn dynamic.Interface, namespace, name, config string) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nad.Group + "/" + nad.Version, "kind": nad.Kind,
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"config": config},
	}}
	if _, err := NADs(dyn).Namespace(namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create NAD %s/%s: %w", namespace, name, err)
	}
	return nil
}
