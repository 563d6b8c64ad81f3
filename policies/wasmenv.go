package policies

import "github.com/plexus-cni/plexus/sdk/wasmfmt"

// OPA's compiled policies import their memory and their host functions
// from one module named "env". wazero's host modules cannot export a
// memory, so envModule assembles a small WebAssembly module that defines
// the memory and re-exports the host functions (imported from
// hostModuleName) under the names the policy imports. Each policy instance
// gets its own env instance, and so its own memory.

const hostModuleName = "plexus_policy_host"

// envImports are the functions of OPA's Wasm ABI v1 a policy may import,
// with the number of i32 parameters each takes: opa_abort and opa_println
// take a string address and return nothing; opa_builtinN takes a built-in
// id, a reserved context and N value addresses and returns a value address.
var envImports = []struct {
	name   string
	params int
	result bool
}{
	{"opa_abort", 1, false},
	{"opa_println", 1, false},
	{"opa_builtin0", 2, true},
	{"opa_builtin1", 3, true},
	{"opa_builtin2", 4, true},
	{"opa_builtin3", 5, true},
	{"opa_builtin4", 6, true},
}

// envModule returns the binary of the env module: a memory of minPages
// that may grow to maxPages (64 KiB each), and envImports re-exported.
func envModule(minPages, maxPages uint32) []byte {
	var types, imports, memory, exports []byte
	types = wasmfmt.AppendU32(types, uint32(len(envImports)))
	imports = wasmfmt.AppendU32(imports, uint32(len(envImports)))
	exports = wasmfmt.AppendU32(exports, uint32(len(envImports)+1))
	for i, f := range envImports {
		types = append(types, 0x60) // func type
		types = wasmfmt.AppendU32(types, uint32(f.params))
		for range f.params {
			types = append(types, 0x7f) // i32
		}
		if f.result {
			types = append(types, 1, 0x7f)
		} else {
			types = append(types, 0)
		}
		imports = wasmfmt.AppendName(imports, hostModuleName)
		imports = wasmfmt.AppendName(imports, f.name)
		imports = append(imports, 0x00) // a function, of type i
		imports = wasmfmt.AppendU32(imports, uint32(i))
		exports = wasmfmt.AppendName(exports, f.name)
		exports = append(exports, 0x00) // function index i (the imports come first)
		exports = wasmfmt.AppendU32(exports, uint32(i))
	}
	memory = wasmfmt.AppendU32(memory, 1)
	memory = append(memory, 0x01) // limits with a maximum
	memory = wasmfmt.AppendU32(memory, minPages)
	memory = wasmfmt.AppendU32(memory, maxPages)
	exports = wasmfmt.AppendName(exports, "memory")
	exports = append(exports, 0x02, 0) // memory index 0

	out := []byte(wasmfmt.Header)
	out = wasmfmt.AppendSection(out, 1, types)
	out = wasmfmt.AppendSection(out, 2, imports)
	out = wasmfmt.AppendSection(out, 5, memory)
	return wasmfmt.AppendSection(out, 7, exports)
}
