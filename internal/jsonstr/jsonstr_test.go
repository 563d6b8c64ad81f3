package jsonstr

import (
	"encoding/json"
	"testing"
)

func TestAppendDecodesAsEncodingJSONEncodes(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "nl\n\r\ttab", "\x00\x1f<&>", "é 😀", "\u2028\u2029", "bad \xff utf8 \xc3"} {
		want, _ := json.Marshal(s)
		var got, w string
		if err := json.Unmarshal(Append(nil, s), &got); err != nil {
			t.Fatalf("%q: %s is not a JSON string: %v", s, Append(nil, s), err)
		}
		json.Unmarshal(want, &w)
		if got != w {
			t.Errorf("%q: decodes as %q, encoding/json's as %q", s, got, w)
		}
	}
}
