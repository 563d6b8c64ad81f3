package policies

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/plexus-cni/plexus/internal/jsonstr"
)

// appendJSON encodes an input document (buildInput's maps, slices,
// strings, numbers and raw JSON) for the wasm evaluator. encoding/json's
// reflection cost a sixth of a whole decision; other types go through it.
func appendJSON(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case string:
		return jsonstr.Append(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case json.RawMessage:
		if !json.Valid(v) {
			return nil, fmt.Errorf("raw JSON value is not valid JSON")
		}
		return append(b, v...), nil
	case map[string]string:
		b = append(b, '{')
		first := true
		for k, s := range v {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = jsonstr.Append(b, k)
			b = append(b, ':')
			b = jsonstr.Append(b, s)
		}
		return append(b, '}'), nil
	case map[string]any:
		b = append(b, '{')
		first := true
		for k, e := range v {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = jsonstr.Append(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendJSON(b, e); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
		}
		return append(b, '}'), nil
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, e); err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return append(b, ']'), nil
	case []string:
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonstr.Append(b, s)
		}
		return append(b, ']'), nil
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}
