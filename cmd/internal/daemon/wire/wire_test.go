package wire

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
)

func TestCallRoundTrips(t *testing.T) {
	for _, c := range []*Call{
		{Env: map[string]string{"CNI_COMMAND": "ADD", "CNI_ARGS": "a=b;c=d", "CNI_EMPTY": ""}, Stdin: []byte(`{"name":"x"}`)},
		{Env: map[string]string{}, Stdin: []byte{}},
	} {
		r, err := DecodeRequest(EncodeCall(c))
		if err != nil || r.Ready || !reflect.DeepEqual(r.Call, c) {
			t.Errorf("%+v: got %+v, %v", c, r, err)
		}
	}
	r, err := DecodeRequest(EncodeReadyQuestion())
	if err != nil || !r.Ready || r.Call != nil {
		t.Errorf("ready question: %+v, %v", r, err)
	}
}

func TestAnswersRoundTrip(t *testing.T) {
	for _, a := range []*Answer{
		{Reply: &Reply{Stdout: []byte(`{"cniVersion":"1.0.0"}`)}},
		{Reply: &Reply{Stdout: []byte(`{"code":7,"msg":"no"}`), Failed: true}},
		{Refused: "request over 4194304 bytes"},
		{Ready: true},
		{},
	} {
		got, err := DecodeAnswer(EncodeAnswer(a))
		if err != nil {
			t.Fatalf("%+v: %v", a, err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Errorf("%+v came back as %+v", a, got)
		}
	}
}

func TestMalformedMessagesAreRefusedByName(t *testing.T) {
	call := EncodeCall(&Call{Env: map[string]string{"CNI_COMMAND": "DEL"}, Stdin: []byte("{}")})
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "bad preamble"},
		{"other protocol", []byte(`{"op":"cni"}`), "bad preamble"},
		{"unknown type", []byte(requestMagic + "Z"), "unknown request type"},
		{"truncated", call[:len(call)-3], "truncated"},
		{"trailing bytes", append(append([]byte{}, call...), 0), "1 bytes after the end"},
		{"count beyond the message", append([]byte(requestMagic+"C"), 0xff, 0xff, 0xff, 0xff), "exceeds the request"},
		{"entry without =", append(append([]byte(requestMagic+"C"), 0, 0, 0, 1, 0, 0, 0, 3), "abc\x00\x00\x00\x00"...), "has no '='"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeRequest(tt.b); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := DecodeAnswer([]byte("HTTP/1.1 400 Bad Request")); err == nil || !strings.Contains(err.Error(), "another plexus version") {
		t.Errorf("answer in another protocol: %v", err)
	}
}

// FuzzDecodeRequest: any bytes decode or fail without panicking, and what
// decodes encodes back to a request that decodes the same.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(EncodeCall(&Call{Env: map[string]string{"CNI_COMMAND": "ADD"}, Stdin: []byte("{}")}))
	f.Add(EncodeReadyQuestion())
	f.Add([]byte(requestMagic + "C\x00\x00\x00\x01\x00\x00\x00\x02a=\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRequest(b)
		if err != nil || r.Ready {
			return
		}
		again, err := DecodeRequest(EncodeCall(r.Call))
		if err != nil || len(again.Call.Env) != len(r.Call.Env) || string(again.Call.Stdin) != string(r.Call.Stdin) {
			t.Fatalf("%q: re-encoded as %+v, %v", b, again, err)
		}
		for k, v := range r.Call.Env {
			if again.Call.Env[k] != v {
				t.Fatalf("%q: %s=%q came back as %q", b, k, v, again.Call.Env[k])
			}
		}
	})
}

func TestClientSaysWhyPlexusdIsUnreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "nobody.sock")
	_, err := (&Client{Socket: sock}).Do(&Call{})
	want := "plexusd is unreachable at " + sock + ": connecting: no such file or directory"
	if !errors.Is(err, ErrUnreachable) || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// A server that accepts and then says nothing, or too much, fails the
// exchange by name; neither is "unreachable", since it may have the call.
func TestClientBoundsTheReply(t *testing.T) {
	for name, tt := range map[string]struct {
		reply []byte
		ask   func(*Client) error
		want  string
	}{
		"silent during a readiness question": {nil, (*Client).Ready, "no reply in time"},
		"a reply over the limit":             {binary.BigEndian.AppendUint32([]byte(replyMagic+"O"), MaxCallBytes+1), do, "reply of 4194305 bytes, over 4194304"},
		"a reply cut short":                  {append(binary.BigEndian.AppendUint32([]byte(replyMagic+"O"), 10), "{}"...), do, "truncated"},
		"another protocol":                   {[]byte("HTTP/1.1 400"), do, "not a plexusd reply"},
	} {
		t.Run(name, func(t *testing.T) {
			// Silent: open until the client has given up.
			sock := serveOnce(t, tt.reply, tt.reply == nil)
			err := tt.ask(&Client{Socket: sock})
			if err == nil || errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "reading plexusd's reply from "+sock+": "+tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// serveOnce answers one connection on a new socket: it reads the request
// to its end, writes reply (nothing when nil), and closes the connection,
// or with open keeps it until the test ends.
func serveOnce(t *testing.T, reply []byte, open bool) string {
	sock := filepath.Join(t.TempDir(), "p.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		ln.Close()
	})
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		io.Copy(io.Discard, conn)
		conn.Write(reply)
		if open {
			<-done
		}
	}()
	return sock
}

func do(c *Client) error {
	_, err := c.Do(&Call{})
	return err
}

// The client takes a reply as soon as it is whole: it does not wait for
// plexusd to close the connection.
func TestClientTakesTheReplyWithoutWaitingForClose(t *testing.T) {
	sock := serveOnce(t, EncodeAnswer(&Answer{Reply: &Reply{Stdout: []byte(`{"cniVersion":"1.1.0"}`)}}), true)
	got := make(chan error, 1)
	go func() {
		r, err := (&Client{Socket: sock}).Do(&Call{})
		if err == nil && string(r.Stdout) != `{"cniVersion":"1.1.0"}` {
			err = errors.New("reply " + string(r.Stdout))
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // a bound on a hang, not a timing
		t.Fatal("no reply while plexusd keeps the connection open")
	}
}

// A call made from skel's arguments gives them back on plexusd's side.
func TestCallCarriesSkelsArguments(t *testing.T) {
	a := &skel.CmdArgs{ContainerID: "c1", Netns: "/run/netns/x", IfName: "eth0", Args: "K8S_POD_NAME=web", Path: "/opt/cni/bin", StdinData: []byte(`{"name":"x"}`)}
	c, err := DecodeRequest(EncodeCall(NewCall("ADD", a)))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Call.CmdArgs(); c.Call.Command() != "ADD" || !reflect.DeepEqual(got, a) {
		t.Errorf("got %s %+v, want ADD %+v", c.Call.Command(), got, a)
	}
	if _, ok := c.Call.Env["CNI_NETNS_OVERRIDE"]; ok {
		t.Error("an empty variable was sent")
	}
}

// A plexusd that takes the call and closes without a word has dropped it:
// the client says so, neither "unreachable" nor a malformed reply.
func TestClientSaysPlexusdClosedBeforeAnswering(t *testing.T) {
	sock := serveOnce(t, nil, false)
	_, err := (&Client{Socket: sock}).Do(&Call{})
	if !errors.Is(err, ErrClosedEarly) || errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "closed the connection before answering at "+sock) {
		t.Fatalf("got %v, want ErrClosedEarly naming the socket", err)
	}
}
