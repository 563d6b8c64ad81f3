// Package daemonconf reads the two keys of a plexus config the thick-mode
// shim needs, daemonSocket and daemonWait, and checks them. It parses JSON
// by hand, as the shim (cmd/plexus-shim, in Rust) does: this scanner is
// fuzzed against encoding/json, and the shim is tested against it
// (tests/thick), so the three agree on what a config says. plexusd parses
// and checks the whole config when it serves the call.
package daemonconf

import (
	"errors"
	"strconv"
	"time"
)

// DefaultWait is how long the shim's ADD waits for plexusd.
const DefaultWait = 10 * time.Second

// Daemon is where plexusd listens and how long an ADD waits for it.
type Daemon struct {
	Socket string
	Wait   time.Duration
}

// Parse reads daemonSocket and daemonWait from a plexus config (a JSON
// object; other keys are skipped, not checked) and checks them as the
// full config parser does.
func Parse(config []byte) (*Daemon, error) {
	socket, wait, err := readKeys(config)
	if err != nil {
		return nil, errors.New("plexus config is not a JSON object: " + err.Error())
	}
	d, err := Check(socket, wait)
	if err != nil {
		return nil, err
	}
	return &Daemon{Socket: socket, Wait: d}, nil
}

// Check checks daemonSocket and returns daemonWait parsed, or its default.
func Check(socket, wait string) (time.Duration, error) {
	if socket != "" && socket[0] != '/' { // absolute (Linux)
		return 0, errors.New(`"daemonSocket" ` + strconv.Quote(socket) + " must be an absolute path")
	}
	d, err := PositiveDuration("daemonWait", wait)
	if d == 0 && err == nil {
		d = DefaultWait
	}
	return d, err
}

// PositiveDuration parses an optional duration key; "" is zero (default).
func PositiveDuration(key, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New(strconv.Quote(key) + ": " + strconv.Quote(v) + ` is not a duration such as "10s" or "1m30s"`)
	}
	if d <= 0 {
		return 0, errors.New(strconv.Quote(key) + ": " + strconv.Quote(v) + " must be positive")
	}
	return d, nil
}
