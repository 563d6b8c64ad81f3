package install

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Token lifetimes. The pod's projected token dies with the installer's
// pod, so an upgrade would fail every thin ADD with 401 until the new pod
// rewrote it; a token bound to the Node outlives any one installer pod.
const (
	DefaultTokenTTL = time.Hour
	// minTokenTTL is the shortest expiration TokenRequest accepts.
	minTokenTTL = 10 * time.Minute
	// maxTokenTTL is the longest the admission policy plexus-tokens allows.
	maxTokenTTL = 24 * time.Hour
	// refreshFraction of a node token's lifetime passes before it is replaced.
	refreshFraction = 0.8
	// tokenRetry spaces failed TokenRequests (no RBAC: not every Poll).
	tokenRetry = time.Minute
)

// nodeToken caches the node-bound token the kubeconfig carries.
type nodeToken struct {
	token     string
	expires   time.Time
	refreshAt time.Time
	// from is the projected token it was requested with: renewed with it.
	from    string
	retryAt time.Time
}

// kubeconfigToken is the kubeconfig's token: a node-bound one when the
// installer has a client and its node, renewed at refreshFraction of its
// lifetime; else podToken, with a warning.
func (in *Installer) kubeconfigToken(ctx context.Context, podToken string) string {
	if in.o.Client == nil || in.o.NodeName == "" {
		return podToken
	}
	now, t := in.now(), &in.node
	fresh := t.token != "" && now.Before(t.refreshAt) && t.from == podToken
	if fresh || now.Before(t.retryAt) {
		return t.usable(now, podToken)
	}
	tok, exp, err := requestNodeToken(ctx, in.o.Client, podToken, in.o.NodeName, in.o.TokenTTL)
	if err != nil {
		t.retryAt = now.Add(tokenRetry)
		in.o.Log.Warn("cannot get a node-bound token (TokenRequest): the plugin's kubeconfig carries the pod's token, which dies with this pod on an upgrade",
			"node", in.o.NodeName, "err", err)
		return t.usable(now, podToken)
	}
	life := exp.Sub(now)
	*t = nodeToken{token: tok, expires: exp, from: podToken,
		refreshAt: now.Add(time.Duration(float64(life) * refreshFraction))}
	in.o.Log.Info("got a node-bound token for the plugin", "node", in.o.NodeName, "expires", exp.UTC().Format(time.RFC3339))
	return tok
}

// usable is the cached node token until it expires, then the pod's.
func (t *nodeToken) usable(now time.Time, podToken string) string {
	if t.token != "" && now.Before(t.expires) {
		return t.token
	}
	return podToken
}

// requestNodeToken asks for a token of the installer's ServiceAccount
// bound to the Node (ServiceAccountTokenNodeBinding, GA in 1.33).
func requestNodeToken(ctx context.Context, c kubernetes.Interface, podToken, node string, ttl time.Duration) (string, time.Time, error) {
	ns, sa, err := serviceAccountOf(podToken)
	if err != nil {
		return "", time.Time{}, err
	}
	secs := int64(ttl / time.Second) // at least minTokenTTL (Options.check)
	req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		ExpirationSeconds: &secs,
		BoundObjectRef:    &authnv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: node},
	}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("TokenRequest for ServiceAccount %s/%s bound to Node %s: %w", ns, sa, node, err)
	}
	if out.Status.Token == "" || out.Status.ExpirationTimestamp.IsZero() {
		return "", time.Time{}, fmt.Errorf("TokenRequest for ServiceAccount %s/%s: the response has no token or expiry", ns, sa)
	}
	return out.Status.Token, out.Status.ExpirationTimestamp.Time, nil
}

// serviceAccountOf reads a token's subject, unverified (RBAC checks the caller).
func serviceAccountOf(token string) (string, string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", "", fmt.Errorf("the ServiceAccount token is not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", "", fmt.Errorf("the ServiceAccount token's claims: %w", err)
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return "", "", fmt.Errorf("the ServiceAccount token's claims: %w", err)
	}
	f := strings.Split(claims.Sub, ":")
	if len(f) != 4 || f[0] != "system" || f[1] != "serviceaccount" || f[2] == "" || f[3] == "" {
		return "", "", fmt.Errorf("the token's subject %q is not a ServiceAccount", claims.Sub)
	}
	return f[2], f[3], nil
}
