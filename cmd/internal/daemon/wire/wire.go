// Package wire is the byte format of one exchange between the thick-mode
// shim and plexusd, and the shim's side of the socket (Client).
//
// One exchange per connection. A request is
//
//	"plexus-call/1\n" op
//
// where op is 'R' (are you ready?) or 'C' followed by the call: a count of
// environment entries, each entry "KEY=VALUE", and the config from stdin.
// A reply is
//
//	"plexus-reply/1\n" status payload
//
// Counts and lengths are 4-byte big-endian. The status says what the
// payload is: a result to print, a CNI error document, the reason the
// request was refused, or readiness.
package wire

import (
	"encoding/binary"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
)

// MaxCallBytes bounds one request or reply.
const MaxCallBytes = 4 << 20

const (
	requestMagic = "plexus-call/1\n"
	replyMagic   = "plexus-reply/1\n"

	opCNI   = 'C'
	opReady = 'R'

	statusOK       = 'O' // payload: the result, printed as is
	statusFailed   = 'F' // payload: the CNI error document
	statusRefused  = 'E' // payload: why the request was not served
	statusReady    = 'Y'
	statusNotReady = 'N'
)

// CNIVersions are the CNI versions plexus supports, oldest first: the
// shim answers VERSION on plexusd's behalf, so both ends take it from here.
var CNIVersions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// Call is one CNI invocation as the runtime made it.
type Call struct {
	// Env holds the CNI_* variables.
	Env   map[string]string
	Stdin []byte
}

// The CNI_* variables a call carries.
const (
	envCommand       = "CNI_COMMAND"
	envContainerID   = "CNI_CONTAINERID"
	envNetns         = "CNI_NETNS"
	envIfName        = "CNI_IFNAME"
	envArgs          = "CNI_ARGS"
	envPath          = "CNI_PATH"
	envNetnsOverride = "CNI_NETNS_OVERRIDE"
)

// NewCall is the call the shim forwards, empty variables left out as skel does.
func NewCall(command string, a *skel.CmdArgs) *Call {
	env := map[string]string{envCommand: command}
	for k, v := range map[string]string{
		envContainerID: a.ContainerID, envNetns: a.Netns, envIfName: a.IfName,
		envArgs: a.Args, envPath: a.Path, envNetnsOverride: a.NetnsOverride,
	} {
		if v != "" {
			env[k] = v
		}
	}
	return &Call{Env: env, Stdin: a.StdinData}
}

// Command is the call's CNI_COMMAND.
func (c *Call) Command() string { return c.Env[envCommand] }

// CmdArgs is the call as skel hands it to a plugin (plexusd's side).
func (c *Call) CmdArgs() *skel.CmdArgs {
	return &skel.CmdArgs{
		ContainerID:   c.Env[envContainerID],
		Netns:         c.Env[envNetns],
		IfName:        c.Env[envIfName],
		Args:          c.Env[envArgs],
		Path:          c.Env[envPath],
		NetnsOverride: c.Env[envNetnsOverride],
		StdinData:     c.Stdin,
	}
}

// Reply is what the plugin prints: a result, or an error when Failed.
type Reply struct {
	Stdout []byte
	Failed bool
}

// Request is a decoded request: a call, or a readiness question.
type Request struct {
	Call  *Call // nil for a readiness question
	Ready bool
}

// Answer is what the server sends back: exactly one of the fields is used.
type Answer struct {
	Reply   *Reply
	Ready   bool   // answers a readiness question
	Refused string // why the request itself could not be served
}

// EncodeCall is the request carrying c.
func EncodeCall(c *Call) []byte {
	n := len(requestMagic) + 1 + 4 + 4 + len(c.Stdin)
	for k, v := range c.Env {
		n += 4 + len(k) + 1 + len(v)
	}
	b := make([]byte, 0, n)
	b = append(b, requestMagic...)
	b = append(b, opCNI)
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.Env)))
	for k, v := range c.Env {
		b = binary.BigEndian.AppendUint32(b, uint32(len(k)+1+len(v)))
		b = append(append(append(b, k...), '='), v...)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.Stdin)))
	return append(b, c.Stdin...)
}

// EncodeReadyQuestion is the request asking whether plexusd serves calls.
func EncodeReadyQuestion() []byte {
	return append([]byte(requestMagic), opReady)
}

// DecodeRequest reads a request; the error says what is wrong with it.
func DecodeRequest(b []byte) (*Request, error) {
	r := reader{b: b}
	if !r.magic(requestMagic) {
		return nil, errors.New("not a plexus call (bad preamble)")
	}
	switch r.byte() {
	case opReady:
		return &Request{Ready: true}, r.end()
	case opCNI:
	default:
		return nil, errors.New("unknown request type")
	}
	count := r.uint32()
	if count > len(r.b)/4 { // every entry takes at least 4 bytes
		return nil, errors.New("environment count " + strconv.Itoa(count) + " exceeds the request")
	}
	c := &Call{Env: make(map[string]string, count)}
	for i := 0; i < count && r.err == nil; i++ {
		kv := string(r.bytes())
		k, v, ok := strings.Cut(kv, "=")
		if !ok && r.err == nil {
			return nil, errors.New("environment entry " + strconv.Itoa(i) + " has no '='")
		}
		c.Env[k] = v
	}
	c.Stdin = r.bytes()
	if err := r.end(); err != nil {
		return nil, err
	}
	return &Request{Call: c}, nil
}

// EncodeAnswer is the reply carrying a.
func EncodeAnswer(a *Answer) []byte {
	status, payload := byte(statusNotReady), []byte(nil)
	switch {
	case a.Refused != "":
		status, payload = statusRefused, []byte(a.Refused)
	case a.Reply != nil && a.Reply.Failed:
		status, payload = statusFailed, a.Reply.Stdout
	case a.Reply != nil:
		status, payload = statusOK, a.Reply.Stdout
	case a.Ready:
		status = statusReady
	}
	b := make([]byte, 0, len(replyMagic)+1+4+len(payload))
	b = append(append(b, replyMagic...), status)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// ReadAnswer reads one reply from r and stops at its end, not at plexusd's
// close. io.EOF means r ended before the reply started.
func ReadAnswer(r io.Reader) (*Answer, error) {
	head := make([]byte, len(replyMagic)+1+4)
	n, err := io.ReadFull(r, head)
	switch {
	case n == 0 && err == io.EOF:
		return nil, io.EOF
	case !strings.HasPrefix(replyMagic, string(head[:min(n, len(replyMagic))])):
		return nil, notAReply(head[:n])
	case err != nil:
		return nil, truncated(err)
	}
	size := int(binary.BigEndian.Uint32(head[len(head)-4:]))
	if size > MaxCallBytes {
		return nil, errors.New("reply of " + strconv.Itoa(size) + " bytes, over " + strconv.Itoa(MaxCallBytes))
	}
	b := append(head, make([]byte, size)...)
	if _, err := io.ReadFull(r, b[len(head):]); err != nil {
		return nil, truncated(err)
	}
	return DecodeAnswer(b)
}

// truncated says a reply ended early, keeping a deadline's error.
func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("truncated")
	}
	return err
}

// notAReply quotes at most 64 bytes of b.
func notAReply(b []byte) error {
	q := strconv.Quote(string(b[:min(len(b), 64)]))
	if len(b) > 64 {
		q += "..."
	}
	return errors.New("not a plexusd reply (another plexus version on the socket?): " + q)
}

// DecodeAnswer reads a reply.
func DecodeAnswer(b []byte) (*Answer, error) {
	r := reader{b: b}
	if !r.magic(replyMagic) {
		return nil, notAReply(b)
	}
	status := r.byte()
	payload := r.bytes()
	if err := r.end(); err != nil {
		return nil, err
	}
	switch status {
	case statusOK, statusFailed:
		return &Answer{Reply: &Reply{Stdout: payload, Failed: status == statusFailed}}, nil
	case statusRefused:
		return &Answer{Refused: string(payload)}, nil
	case statusReady, statusNotReady:
		return &Answer{Ready: status == statusReady}, nil
	}
	return nil, errors.New("reply with unknown status " + strconv.Quote(string(status)))
}

// reader decodes in order and remembers the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) magic(m string) bool {
	if len(r.b) < len(m) || string(r.b[:len(m)]) != m {
		return false
	}
	r.b = r.b[len(m):]
	return true
}

// take consumes the next n bytes; nil once anything is missing.
func (r *reader) take(n int) []byte {
	if r.err == nil && n > len(r.b) {
		r.err = errors.New("truncated")
	}
	if r.err != nil {
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) uint32() int {
	if b := r.take(4); b != nil {
		return int(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) bytes() []byte { return r.take(r.uint32()) }

func (r *reader) end() error {
	if r.err == nil && len(r.b) > 0 {
		r.err = errors.New(strconv.Itoa(len(r.b)) + " bytes after the end")
	}
	return r.err
}
