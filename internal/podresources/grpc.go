package podresources

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
)

// service is the API's gRPC service name (package v1, PodResourcesLister).
const service = "/v1.PodResourcesLister/"

// conn is one HTTP/2 connection to kubelet's socket, without TLS, as
// kubelet's gRPC server serves it (prior knowledge, no upgrade).
type conn struct{ client *http.Client }

func dial(socket string) *conn {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	return &conn{client: &http.Client{Transport: &http.Transport{
		Protocols: &protocols,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}}
}

func (c *conn) close() { c.client.CloseIdleConnections() }

// statusError is a gRPC status other than OK.
type statusError struct {
	code    int
	message string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("code %s: %s", codeName(e.code), e.message)
}

// gRPC status codes plexus tells apart.
const (
	codeCanceled         = 1
	codeDeadlineExceeded = 4
	codeUnavailable      = 14
)

var codeNames = []string{"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
	"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted",
	"OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated"}

func codeName(code int) string {
	if code >= 0 && code < len(codeNames) {
		return codeNames[code]
	}
	return strconv.Itoa(code)
}

// refused tells an answer from kubelet (worth asking List) from a
// connection that failed or timed out (List would fail the same way).
func refused(err error) bool {
	var s *statusError
	if !errors.As(err, &s) {
		return false
	}
	switch s.code {
	case codeCanceled, codeDeadlineExceeded, codeUnavailable:
		return false
	}
	return true
}

// call makes one unary call of the service's method with the encoded
// request message and returns the encoded response message.
func (c *conn) call(ctx context.Context, method string, request []byte) ([]byte, error) {
	// A message is framed by a compression flag (0: none) and its length.
	body := make([]byte, 5, 5+len(request))
	binary.BigEndian.PutUint32(body[1:], uint32(len(request)))
	body = append(body, request...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://localhost"+service+method, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	defer func() { _ = resp.Body.Close() }()
	// The body first: the status comes in its trailers.
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, 5+maxMessage+1))
	if err := grpcStatus(resp); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if readErr != nil {
		return nil, fmt.Errorf("%s: reading the answer: %w", method, readErr)
	}
	msg, err := unframe(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return msg, nil
}

// grpcStatus is the call's outcome: nil for OK, a *statusError for any other
// gRPC status, or what made the answer not a gRPC one.
func grpcStatus(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP status %s, not a gRPC answer", resp.Status)
	}
	// In the trailers, or in the headers of an answer without a message.
	s := resp.Trailer.Get("Grpc-Status")
	if s == "" {
		s = resp.Header.Get("Grpc-Status")
	}
	if s == "" {
		return errors.New("the answer carries no gRPC status")
	}
	code, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("gRPC status %q", s)
	}
	if code == 0 {
		return nil
	}
	msg := resp.Trailer.Get("Grpc-Message")
	if msg == "" {
		msg = resp.Header.Get("Grpc-Message")
	}
	// Percent-encoded; shown as sent when it does not decode.
	if m, err := url.PathUnescape(msg); err == nil {
		msg = m
	}
	return &statusError{code: code, message: msg}
}

// unframe returns the one message of a unary answer.
func unframe(data []byte) ([]byte, error) {
	if len(data) < 5 {
		return nil, errors.New("the answer holds no message")
	}
	if data[0] != 0 {
		return nil, errors.New("the answer is compressed, which plexus did not ask for")
	}
	size := binary.BigEndian.Uint32(data[1:5])
	if size > maxMessage {
		return nil, fmt.Errorf("the answer's message is over %d bytes", maxMessage)
	}
	if int(size) != len(data)-5 {
		return nil, fmt.Errorf("the answer's message is %d bytes, framed as %d", len(data)-5, size)
	}
	return data[5:], nil
}
