package wire

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// ErrUnreachable is wrapped when plexusd did not get the call.
var ErrUnreachable = errors.New("plexusd is unreachable")

// ErrClosedEarly: plexusd took the call and closed without answering (it may be half done).
var ErrClosedEarly = errors.New("plexusd closed the connection before answering")

// readyTimeout bounds one readiness question, so a hung plexusd cannot stall an ADD.
const readyTimeout = time.Second

// Client is a plugin's side of the socket.
type Client struct {
	Socket string
}

// Do sends one call and returns plexusd's reply. Failing to connect or to
// send is ErrUnreachable; a lost answer is not: the call may have run.
func (c *Client) Do(call *Call) (*Reply, error) {
	a, err := c.exchange(EncodeCall(call), 0)
	if err != nil {
		return nil, err
	}
	if a.Refused != "" {
		return nil, errors.New("plexusd at " + c.Socket + " refused the call: " + a.Refused)
	}
	if a.Reply == nil {
		return nil, errors.New("plexusd at " + c.Socket + " answered the call without a reply")
	}
	return a.Reply, nil
}

// Ready asks once whether plexusd serves calls; not ready is ErrUnreachable.
func (c *Client) Ready() error {
	a, err := c.exchange(EncodeReadyQuestion(), readyTimeout)
	if err != nil {
		return err
	}
	if !a.Ready {
		return errors.New(ErrUnreachable.Error() + " at " + c.Socket + ": not ready")
	}
	return nil
}

// WaitReady asks until plexusd is ready or the deadline passes.
func (c *Client) WaitReady(deadline time.Time) error {
	for wait := 20 * time.Millisecond; ; wait = min(wait*2, 500*time.Millisecond) {
		err := c.Ready()
		if err == nil {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		time.Sleep(min(wait, left))
	}
}

// exchange sends one request and reads the answer; timeout 0 waits for the call.
func (c *Client) exchange(req []byte, timeout time.Duration) (*Answer, error) {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: c.Socket, Net: "unix"})
	if err != nil {
		return nil, unreachable(c.Socket, "connecting", err)
	}
	defer conn.Close()
	if timeout > 0 {
		if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
			return nil, unreachable(c.Socket, "connecting", err)
		}
	}
	// Go ignores SIGPIPE on sockets: a plexusd gone mid-write is an error.
	if _, err := conn.Write(req); err != nil {
		return nil, unreachable(c.Socket, "sending the call", err)
	}
	if err := conn.CloseWrite(); err != nil {
		return nil, unreachable(c.Socket, "sending the call", err)
	}
	a, err := ReadAnswer(conn)
	switch {
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf("%w at %s (it stopped or restarted during the call)", ErrClosedEarly, c.Socket)
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = errors.New("no reply in time")
	}
	if err != nil {
		return nil, errors.New("reading plexusd's reply from " + c.Socket + ": " + err.Error())
	}
	return a, nil
}

// unreachable is ErrUnreachable with where and why.
func unreachable(socket, doing string, err error) error {
	return fmt.Errorf("%w at %s: %s: %w", ErrUnreachable, socket, doing, unwrapOp(err))
}

// unwrapOp is the system's reason alone: the message says the rest.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	var se *os.SyscallError
	if errors.As(err, &se) && se.Err != nil {
		err = se.Err
	}
	return err
}
