/work/main/cmd/plexus-shim/../../_output/cargo/release/deps/plexus_shim-1768b7b14bc773dc.d: src/main.rs src/config.rs src/duration.rs src/quote.rs src/wire.rs

/work/main/cmd/plexus-shim/../../_output/cargo/release/deps/plexus_shim-1768b7b14bc773dc: src/main.rs src/config.rs src/duration.rs src/quote.rs src/wire.rs

src/main.rs:
src/config.rs:
src/duration.rs:
src/quote.rs:
src/wire.rs:

# env-dep:PLEXUS_VERSION=4207921-dirty
