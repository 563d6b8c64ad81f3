package podresources

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
)

// conn is HTTP/2 without TLS ("h2c", prior knowledge) on kubelet's unix
// socket, as gRPC uses it.
type conn struct {
	tr *http.Transport
}

func newConn(socket string) *conn {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	return &conn{tr: &http.Transport{
		Protocols: &protocols,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
}

func (c *conn) close() { c.tr.CloseIdleConnections() }

// codeOK is gRPC's status for success.
const codeOK = 0

// statusError is a call's non-OK grpc-status.
type statusError struct {
	code    int
	message string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("gRPC status %d: %s", e.code, e.message)
}

// call makes one unary gRPC call: the request message in one
// length-prefixed frame, the answer's one frame, then the status trailers
// (or, for an error without a message, the headers: "Trailers-Only").
func (c *conn) call(ctx context.Context, method string, msg []byte) ([]byte, error) {
	body := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(body[1:5], uint32(len(msg)))
	copy(body[5:], msg)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://localhost"+method, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := c.tr.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP status %s", resp.Status)
	}
	answer, readErr := readFrame(resp.Body)
	// The trailers arrive only once the body has been read to its end.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMessage))
	if err := grpcStatus(resp); err != nil {
		return nil, err
	}
	if readErr != nil {
		return nil, readErr
	}
	return answer, nil
}

// readFrame reads one length-prefixed message; compressed ones are not
// expected (plexus asks for none).
func readFrame(r io.Reader) ([]byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if head[0] != 0 {
		return nil, fmt.Errorf("the answer is compressed, which plexus did not ask for")
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > maxMessage {
		return nil, fmt.Errorf("the answer's %d bytes exceed %d", n, maxMessage)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	return msg, nil
}

func grpcStatus(resp *http.Response) error {
	s, m := resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	if s == "" {
		s, m = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	if s == "" {
		return fmt.Errorf("the answer has no grpc-status")
	}
	code, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("grpc-status %q is not a number", s)
	}
	if code == codeOK {
		return nil
	}
	if u, err := url.PathUnescape(m); err == nil {
		m = u
	}
	return &statusError{code: code, message: m}
}
