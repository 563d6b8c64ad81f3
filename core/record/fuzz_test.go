package record

import (
	"encoding/json"
	"testing"

	"github.com/plexus-cni/plexus/core/names"
)

// FuzzDecode: arbitrary bytes decode to a record whose attachments are
// safe to act on, or to ErrCorrupt.
func FuzzDecode(f *testing.F) {
	good, _ := json.Marshal(sample())
	good = append([]byte(`{"version":1,`), good[1:]...)
	f.Add(good)
	f.Add([]byte(`{"version":1,"containerID":"c","attachments":[]}`))
	f.Add([]byte(`{`))
	f.Add(append(append(append([]byte{}, good...), '\n'), good[:len(good)/2]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			return
		}
		for _, a := range r.Attachments {
			if names.Interface(a.IfName) != nil || len(a.Config) == 0 {
				t.Fatalf("unsafe attachment accepted: %+v", a)
			}
		}
	})
}
