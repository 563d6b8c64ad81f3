package kube

import (
	"cmp"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// prewarm returns a copy of cfg whose transport starts connecting to the
// API server (TCP and TLS) at once and hands that connection to the first
// request: a thin ADD's delegates run meanwhile, so its first request
// finds it ready. No request is made to warm it.
//
// cfg is returned unchanged when the connection is not a plain TLS one
// plexus could make the same way: plain HTTP, a custom dialer or
// transport, an exec or auth provider plugin, or a proxy.
func prewarm(cfg *rest.Config, timeout time.Duration) (*rest.Config, *warmDialer) {
	if cfg.Transport != nil || cfg.Dial != nil || cfg.Proxy != nil || cfg.ExecProvider != nil || cfg.AuthProvider != nil {
		return cfg, nil
	}
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil || u.Scheme != "https" {
		return cfg, nil
	}
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err != nil || p != nil {
		return cfg, nil
	}
	tlsConf, err := rest.TLSConfigFor(cfg)
	if err != nil || tlsConf == nil {
		return cfg, nil
	}
	d := &warmDialer{addr: net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "443")), tls: tlsConf, protos: alpn(tlsConf.NextProtos)}
	d.start(timeout)
	c := rest.CopyConfig(cfg)
	// The TLS settings now live in the dialer: client-go refuses a custom
	// transport beside its own TLS options.
	c.TLSClientConfig = rest.TLSClientConfig{}
	c.Transport = &http.Transport{
		DialTLSContext:      d.DialTLSContext,
		ForceAttemptHTTP2:   slices.Contains(d.protos, "h2"),
		MaxIdleConnsPerHost: 25,
		IdleConnTimeout:     90 * time.Second,
	}
	return c, d
}

// warmDialer makes the API server's TLS connections, the first one ahead.
type warmDialer struct {
	addr   string
	tls    *tls.Config
	protos []string // offered in the handshake (ALPN)

	warm   chan net.Conn // the connection dialed ahead (nil if that failed), once
	cancel context.CancelFunc
	once   sync.Once
}

func (d *warmDialer) start(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	d.warm, d.cancel = make(chan net.Conn, 1), cancel
	go func() {
		conn, _ := d.dial(ctx, "tcp", d.addr) // nil on error
		d.warm <- conn
	}()
}

// DialTLSContext is the transport's dialer: the first connection to the
// server is the one dialed ahead (waited for); if that failed, or later,
// it dials anew, so an error is the one a request would have met.
func (d *warmDialer) DialTLSContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if addr == d.addr {
		if conn := d.take(ctx); conn != nil {
			return conn, nil
		}
	}
	return d.dial(ctx, network, addr)
}

// take is the connection dialed ahead, for the first caller only.
func (d *warmDialer) take(ctx context.Context) net.Conn {
	var conn net.Conn
	d.once.Do(func() {
		select {
		case conn = <-d.warm:
			d.cancel() // an established connection outlives its dial's context
		case <-ctx.Done():
			d.cancel()
			go d.discard()
		}
	})
	return conn
}

// discard closes the connection dialed ahead when nothing took it.
func (d *warmDialer) discard() {
	if conn := <-d.warm; conn != nil {
		conn.Close()
	}
}

func (d *warmDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	cfg := d.tls.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		cfg.ServerName = host
	}
	cfg.NextProtos = d.protos
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}, Config: cfg}
	return dialer.DialContext(ctx, network, addr)
}

// alpn is what the handshake offers: the kubeconfig's NextProtos, else
// HTTP/2 (unless DISABLE_HTTP2 is set) then HTTP/1.1, as client-go does.
func alpn(configured []string) []string {
	switch {
	case len(configured) > 0:
		return configured
	case os.Getenv("DISABLE_HTTP2") != "":
		return []string{"http/1.1"}
	}
	return []string{"h2", "http/1.1"}
}

// close ends the dial ahead and closes its connection if no request took it.
func (d *warmDialer) close() {
	d.once.Do(func() {
		d.cancel()
		d.discard()
	})
}
