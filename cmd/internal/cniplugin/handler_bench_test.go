package cniplugin

import (
	"strconv"
	"testing"
)

// BenchmarkHandlerLifecycle is plexusd's own cost per pod lifecycle (ADD
// and DEL through its handler, one selection, the manifests source) with a
// delegate that attaches nothing: what thick mode adds beside the shim's
// start and the delegates' run. Most of it is file creation in cacheDir
// (libcni's result cache, the record, the lock, the DEL's tombstone):
//
//	go test -run '^$' -bench HandlerLifecycle -cpuprofile cpu.out ./cmd/internal/cniplugin/
func BenchmarkHandlerLifecycle(b *testing.B) {
	f := newStateFixture(b)
	i := 0
	for b.Loop() {
		id := "c" + strconv.Itoa(i)
		i++
		f.call(b, "ADD", id, false, nil)
		f.call(b, "DEL", id, false, nil)
	}
}
