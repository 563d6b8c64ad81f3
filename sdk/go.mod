module github.com/plexus-cni/plexus/sdk

go 1.24
