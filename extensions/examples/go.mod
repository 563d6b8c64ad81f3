module github.com/plexus-cni/plexus/extensions/examples

go 1.24

require github.com/plexus-cni/plexus/sdk v0.0.0

replace github.com/plexus-cni/plexus/sdk => ../../sdk
