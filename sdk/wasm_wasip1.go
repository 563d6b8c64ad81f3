//go:build wasip1

package sdk

import "unsafe"

// The ABI v1 glue (ABI.md): the host calls an exported hook with the input
// length; the guest copies the input into its own buffer with input_read,
// runs the hook and hands the output back with output_write. The guest owns
// every buffer, so no allocator is exported.

//go:wasmimport plexus input_read
func inputRead(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport plexus output_write
func outputWrite(ptr unsafe.Pointer, n uint32) uint32

//go:wasmexport prepare
func exportPrepare(n uint32) uint32 { return serve(HookPrepare, n) }

//go:wasmexport enrich
func exportEnrich(n uint32) uint32 { return serve(HookEnrich, n) }

// serve returns 0 when it wrote an output; 1 when the input could not be
// read, which the host reports as an ABI error.
func serve(hook string, n uint32) uint32 {
	in := make([]byte, n)
	if n > 0 && inputRead(unsafe.Pointer(&in[0]), n) != n {
		return 1
	}
	out := Handle(registered, hook, in)
	outputWrite(unsafe.Pointer(&out[0]), uint32(len(out)))
	return 0
}
