package wire

import (
	"errors"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// ErrUnreachable is wrapped when plexusd cannot be reached at all, as
// opposed to failing a call: it did not get the call.
var ErrUnreachable = errors.New("plexusd is unreachable")

// readyTimeout bounds one readiness question, so that a hung plexusd
// cannot hold a waiting ADD past its deadline.
const readyTimeout = time.Second

// Client is a plugin's side of the socket. It uses the socket system
// calls directly, as the shim did when it was built from this package.
type Client struct {
	Socket string
}

// Do sends one call and returns plexusd's reply. Failing to connect or to
// send is ErrUnreachable; once plexusd has the call, a lost answer is not,
// since the call may have run.
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

// Ready asks once whether plexusd serves calls; not ready is
// ErrUnreachable too.
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

// WaitReady asks until plexusd is ready or the deadline passes; the error
// is the last answer.
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

// exchange sends one request and reads the answer; timeout 0 waits as
// long as the call takes (the runtime kills a shim that took too long).
func (c *Client) exchange(req []byte, timeout time.Duration) (*Answer, error) {
	fd, err := c.connect(timeout)
	if err != nil {
		return nil, &unreachable{c.Socket, "connecting", err}
	}
	defer syscall.Close(fd)
	if err := sendAll(fd, req); err != nil {
		return nil, &unreachable{c.Socket, "sending the call", err}
	}
	if err := syscall.Shutdown(fd, syscall.SHUT_WR); err != nil {
		return nil, &unreachable{c.Socket, "sending the call", err}
	}
	b, err := ReadAll(fd, len(replyMagic)+1+4+MaxCallBytes)
	if err != nil {
		return nil, errors.New("reading plexusd's reply from " + c.Socket + ": " + err.Error())
	}
	a, err := DecodeAnswer(b)
	if err != nil {
		return nil, errors.New("reading plexusd's reply from " + c.Socket + ": " + err.Error())
	}
	return a, nil
}

func (c *Client) connect(timeout time.Duration) (int, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if timeout > 0 {
		tv := syscall.NsecToTimeval(timeout.Nanoseconds())
		if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
			syscall.Close(fd)
			return -1, err
		}
		if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv); err != nil {
			syscall.Close(fd)
			return -1, err
		}
	}
	err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: c.Socket})
	for err == syscall.EINTR {
		// An interrupted connect goes on in the kernel; a second one
		// reports how it ended.
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: c.Socket})
		if err == syscall.EISCONN {
			err = nil
		}
	}
	if err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// unreachable is ErrUnreachable with where and why.
type unreachable struct {
	socket, doing string
	err           error
}

func (u *unreachable) Error() string {
	return ErrUnreachable.Error() + " at " + u.socket + ": " + u.doing + ": " + u.err.Error()
}

func (u *unreachable) Is(target error) bool { return target == ErrUnreachable }

func (u *unreachable) Unwrap() error { return u.err }

func sendAll(fd int, b []byte) error {
	for len(b) > 0 {
		// MSG_NOSIGNAL: a plexusd gone mid-write is an error, not SIGPIPE.
		n, err := sendto(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func sendto(fd int, b []byte) (int, error) {
	n, _, errno := syscall.Syscall6(syscall.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), syscall.MSG_NOSIGNAL, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// ReadAll reads fd to its end, failing past max bytes.
func ReadAll(fd, max int) ([]byte, error) {
	b := make([]byte, 0, 4096)
	for {
		if len(b) == cap(b) {
			if len(b) > max {
				return nil, errors.New("over " + strconv.Itoa(max) + " bytes")
			}
			b = append(b, 0)[:len(b)]
		}
		n, err := syscall.Read(fd, b[len(b):cap(b)])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return nil, errors.New("no reply in time")
		case err != nil:
			return nil, err
		case n == 0:
			return b, nil
		}
		b = b[:len(b)+n]
	}
}
