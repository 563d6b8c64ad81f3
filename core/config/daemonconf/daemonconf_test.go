package daemonconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseReadsTheDaemonKeys(t *testing.T) {
	tests := []struct {
		name, config string
		want         Daemon
	}{
		{"both keys", `{"cniVersion":"1.0.0","daemonSocket":"/run/p.sock","daemonWait":"3s"}`, Daemon{"/run/p.sock", 3 * time.Second}},
		{"neither key: default wait", `{"type":"plexus-shim"}`, Daemon{"", DefaultWait}},
		{"keys after nested values", `{"ipam":{"a":[1,-2.5e3,{"daemonSocket":"/no"}],"b":true,"c":null},"daemonSocket":"/yes"}`, Daemon{"/yes", DefaultWait}},
		{"last occurrence wins", `{"daemonSocket":"/a","daemonSocket":"/b"}`, Daemon{"/b", DefaultWait}},
		{"null keeps the earlier value", `{"daemonSocket":"/a","daemonSocket":null}`, Daemon{"/a", DefaultWait}},
		{"escapes", `{"daemonSocket":"\/run\/p\u00e9\ud83d\ude00.sock"}`, Daemon{"/run/pé😀.sock", DefaultWait}},
		{"other keys are not checked here", `{"daemonSocket":"/s","apiTimeout":"x","unknown":1}`, Daemon{"/s", DefaultWait}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse([]byte(tt.config))
			if err != nil || *d != tt.want {
				t.Fatalf("got %+v, %v; want %+v", d, err, tt.want)
			}
		})
	}
}

func TestParseNamesWhatIsWrong(t *testing.T) {
	tests := []struct{ name, config, want string }{
		{"not an object", `["daemonSocket"]`, "not a JSON object"},
		{"truncated", `{"daemonSocket":"/a"`, "unexpected end of JSON input"},
		{"trailing data", `{} x`, "data after the top-level value"},
		{"socket not a string", `{"daemonSocket":5}`, `"daemonSocket" must be a string`},
		{"relative socket", `{"daemonSocket":"run/p.sock"}`, `"daemonSocket" "run/p.sock" must be an absolute path`},
		{"bad wait", `{"daemonSocket":"/p","daemonWait":"soon"}`, `"daemonWait": "soon" is not a duration`},
		{"negative wait", `{"daemonWait":"-1s"}`, `"daemonWait": "-1s" must be positive`},
		{"bad escape", `{"a":"\x"}`, "invalid escape"},
		{"control character", "{\"a\":\"\x01\"}", "control character"},
		{"bad number", `{"a":01}`, "want ',' or '}'"},
		{"too deep", `{"a":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + `}`, "exceeded max depth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.config))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// FuzzReadKeysAgreesWithEncodingJSON: the hand-written scanner accepts
// exactly the documents encoding/json accepts as an object, and reads the
// two keys as encoding/json does with exact key names.
func FuzzReadKeysAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"daemonSocket":"/a","daemonWait":"1s"}`, `{}`, `{"daemonSocket":null}`, `{"x":[1,2,{"y":"\u0041"}]}`,
		`{"daemonSocket":"\ud800x"}`, `{"daemonSocket":"\udc00\ud800\udc00"}`, "{\"daemonSocket\":\"\xff\xfe\"}",
		`{"daemonSocket":1}`, `{"a":-0.5E+7}`, `[]`, `{"a":tru}`, `{"DaemonSocket":"/a"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		socket, wait, err := readKeys(b)
		wsocket, wwait, werr := readKeysWithEncodingJSON(b)
		switch {
		case (err == nil) != (werr == nil):
			t.Fatalf("%q: error %v, encoding/json %v", b, err, werr)
		case err == nil && (socket != wsocket || wait != wwait):
			t.Fatalf("%q: read %q %q, encoding/json %q %q", b, socket, wait, wsocket, wwait)
		}
	})
}

// readKeysWithEncodingJSON is the oracle: every top-level pair in order,
// each exact key decoded into its string as encoding/json decodes a field.
func readKeysWithEncodingJSON(b []byte) (socket, wait string, err error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return "", "", err
	}
	if keys == nil {
		return "", "", errors.New("null")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return "", "", err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", "", err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", "", err
		}
		dst := map[string]*string{"daemonSocket": &socket, "daemonWait": &wait}[tok.(string)]
		if dst == nil || string(raw) == "null" {
			continue
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return "", "", err
		}
	}
	return socket, wait, nil
}
