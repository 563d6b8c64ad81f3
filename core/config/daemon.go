package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// DefaultDaemonWait is how long an ADD waits for plexusd when daemonWait is
// not set.
const DefaultDaemonWait = 10 * time.Second

// Daemon holds the keys of thick mode: where plexusd listens, and how long
// an ADD waits for an unreachable or unready plexusd. The shim reads these
// keys alone (ParseDaemon), into the same types as Config's, and checks
// them with the same code.
type Daemon struct {
	// DaemonSocket switches the plugin to a forwarder that sends every
	// call to plexusd at this unix socket.
	DaemonSocket string   `json:"daemonSocket,omitempty"`
	DaemonWait   Duration `json:"daemonWait,omitempty"`
}

// ParseDaemon reads daemonSocket and daemonWait from a plexus config and
// checks them as Parse does; other keys are not checked (plexusd parses the
// whole config when it serves the call).
func ParseDaemon(stdin []byte) (*Daemon, error) {
	d := &Daemon{}
	if err := decode(stdin, d); err != nil {
		return nil, err
	}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("plexus config: %w", err)
	}
	return d, nil
}

// Wait is daemonWait, or its default.
func (d *Daemon) Wait() time.Duration { return d.DaemonWait.Or(DefaultDaemonWait) }

func (d *Daemon) check() error {
	if d.DaemonSocket != "" && d.DaemonSocket[0] != '/' { // absolute (Linux)
		return errors.New(`"daemonSocket" ` + strconv.Quote(d.DaemonSocket) + " must be an absolute path")
	}
	return nil
}

// decode decodes a config object into v; what is not a JSON object is
// refused as such.
func decode(stdin []byte, v any) error {
	err := Unmarshal(stdin, v)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se), errors.As(err, &te) && te.Field == "":
		return fmt.Errorf("plexus config is not a JSON object: %w", err)
	}
	return fmt.Errorf("plexus config: %w", err)
}
