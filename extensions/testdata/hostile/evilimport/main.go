// Command evilimport is a hostile test module importing a host function
// outside the ABI; the host must refuse it at load time.
package main

import "github.com/plexus-cni/plexus/sdk"

//go:wasmimport env evil
func evil() uint32

func init() {
	sdk.Register(sdk.Module{Prepare: func(*sdk.PrepareRequest) (*sdk.PrepareResponse, error) {
		if evil() != 0 {
			return nil, sdk.Reject("evil")
		}
		return nil, nil
	}})
}

func main() {}
