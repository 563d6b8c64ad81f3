package kube

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/plexus-cni/plexus/core/source"
)

// tlsAPI is fakeAPI over TLS with HTTP/2, counting the connections the
// server accepted and noting each request's protocol.
type tlsAPI struct {
	*fakeAPI
	srv    *httptest.Server
	mu     sync.Mutex
	conns  int
	proto  []int
	closed chan struct{} // one per connection closed
}

func newTLSAPI(t *testing.T) *tlsAPI {
	a := &tlsAPI{fakeAPI: &fakeAPI{codes: []int{http.StatusOK}, body: `{}`}, closed: make(chan struct{}, 100)}
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.proto = append(a.proto, r.ProtoMajor)
		a.mu.Unlock()
		a.fakeAPI.ServeHTTP(w, r)
	}))
	a.srv.EnableHTTP2 = true
	a.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected here
	a.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			a.mu.Lock()
			a.conns++
			a.mu.Unlock()
		case http.StateClosed:
			a.closed <- struct{}{}
		}
	}
	a.srv.StartTLS()
	t.Cleanup(a.srv.Close)
	return a
}

func (a *tlsAPI) connections() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conns
}

// config trusts the server's certificate, as a kubeconfig's CA data does.
func (a *tlsAPI) config() *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.srv.Certificate().Raw})
	return &rest.Config{Host: a.srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

func TestPrewarmConnectsBeforeAnyRequestAndTheFirstRequestUsesIt(t *testing.T) {
	api := newTLSAPI(t)
	s, err := New(api.config(), Options{Prewarm: true, Budget: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitConnected(t, api)
	if api.connections() != 1 || api.count() != 0 {
		t.Fatalf("before any request: %d connections, %d requests; want 1 connection and no request", api.connections(), api.count())
	}
	pod := &source.Pod{Namespace: "ns", Name: "p", UID: "u1"}
	if err := s.PublishStatus(context.Background(), pod, []byte(`[]`)); err != nil {
		t.Fatal(err)
	}
	s.Event(context.Background(), pod, source.EventNormal, "AddedInterfaces", "attached")
	if api.connections() != 1 {
		t.Errorf("%d connections for a PATCH and an event after the prewarm, want the one made ahead", api.connections())
	}
	for i, p := range api.proto {
		if p != 2 {
			t.Errorf("request %d was HTTP/%d, want HTTP/2 (client-go's default)", i, p)
		}
	}
}

func TestPrewarmWithAnUntrustedServerFailsTheRequestNamingTheCertificate(t *testing.T) {
	api := newTLSAPI(t)
	cfg := api.config()
	cfg.CAData = nil // the system's roots do not hold the test server's CA
	s, err := New(cfg, Options{Prewarm: true, Budget: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.PublishStatus(context.Background(), &source.Pod{Namespace: "ns", Name: "p"}, []byte(`[]`))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("err = %v, want the certificate named", err)
	}
	if api.count() != 0 {
		t.Errorf("%d requests reached an untrusted server", api.count())
	}
}

func TestPrewarmLeavesConfigsItCannotDialAlone(t *testing.T) {
	plain := &rest.Config{Host: "http://127.0.0.1:1"}
	custom := &rest.Config{Host: "https://127.0.0.1:1", Dial: (&net.Dialer{}).DialContext}
	for name, cfg := range map[string]*rest.Config{"plain HTTP": plain, "own dialer": custom} {
		got, d := prewarm(cfg, time.Second)
		if got != cfg || d != nil {
			t.Errorf("%s: prewarm changed the config", name)
		}
	}
}

func TestCloseWithoutARequestClosesTheConnectionMadeAhead(t *testing.T) {
	api := newTLSAPI(t)
	s, err := New(api.config(), Options{Prewarm: true})
	if err != nil {
		t.Fatal(err)
	}
	waitConnected(t, api)
	s.Close()
	select {
	case <-api.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection made ahead was not closed")
	}
}

// waitConnected waits until the server has accepted the connection made
// ahead.
func waitConnected(t *testing.T, api *tlsAPI) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); api.connections() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no connection was made ahead of the first request")
		}
	}
}

func TestPrewarmKeepsTheKubeconfigsProtocolChoice(t *testing.T) {
	api := newTLSAPI(t)
	cfg := api.config()
	cfg.NextProtos = []string{"http/1.1"}
	s, err := New(cfg, Options{Prewarm: true, Budget: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PublishStatus(context.Background(), &source.Pod{Namespace: "ns", Name: "p"}, []byte(`[]`)); err != nil {
		t.Fatal(err)
	}
	if len(api.proto) != 1 || api.proto[0] != 1 || api.connections() != 1 {
		t.Errorf("protocols %v over %d connections, want one HTTP/1.1 request on the connection made ahead", api.proto, api.connections())
	}
}
