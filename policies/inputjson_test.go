package policies

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The wasm evaluator's encoder must read back as encoding/json's does.
func TestInputJSONMatchesEncodingJSON(t *testing.T) {
	tests := map[string]any{
		"scalars":           map[string]any{"n": nil, "t": true, "f": false, "i": 42, "s": "x"},
		"escapes":           "quote\" backslash\\ nl\n cr\r tab\t nul\x00 bell\x07 html<&>",
		"unicode":           "héllo, 世界, 🎉",
		"invalid UTF-8":     "bad\xff\xfebytes",
		"string maps":       map[string]string{"app": "web", "k\"ey": "v\\al"},
		"nested":            map[string]any{"a": []any{1, "two", map[string]any{"three": []string{"x", "y"}}}},
		"raw JSON":          map[string]any{"raw": json.RawMessage(`{"name":"blue","ips":["10.0.0.1/24"],"n":1.5}`)},
		"other types":       map[string]any{"float": 2.5, "labels": map[string]int{"a": 1}},
		"empty collections": map[string]any{"m": map[string]any{}, "l": []any{}, "s": []string{}},
	}
	for name, v := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := appendJSON(nil, v)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(v)
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("%s is not JSON: %v", got, err)
			}
			_ = json.Unmarshal(want, &w)
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("got %s, encoding/json gives %s", got, want)
			}
		})
	}
	if _, err := appendJSON(nil, map[string]any{"raw": json.RawMessage(`{bad`)}); err == nil {
		t.Fatal("invalid raw JSON was encoded")
	}
}
