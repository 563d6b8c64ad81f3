// Package daemonconf holds the keys of a plexus config that thick mode's
// shim reads, daemonSocket and daemonWait, and the Duration type of every
// duration key. Package config uses both; they live apart so that the
// shim, started for every call, loads neither the CNI library nor slog.
package daemonconf

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Duration is the type of every duration key in plexus's config: a
// positive Go duration string in JSON ("500ms", "1m30s"). A key left out
// is zero, its default. A bare number is refused: its unit would be a guess.
type Duration time.Duration

var durationType = reflect.TypeFor[Duration]()

// MarshalJSON writes the duration as a string such as "50ms".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string; null leaves d as it is. A bad
// value is a *json.UnmarshalTypeError, which encoding/json completes with
// the key's path for Unmarshal's message.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	v, err := parseDuration(b)
	if err != nil {
		return &json.UnmarshalTypeError{Value: err.Error(), Type: durationType}
	}
	*d = Duration(v)
	return nil
}

func parseDuration(b []byte) (time.Duration, error) {
	var s string
	if len(b) == 0 || b[0] != '"' || json.Unmarshal(b, &s) != nil {
		return 0, fmt.Errorf(`%s is not a duration string such as "10s" or "1m30s"`, b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf(`%q is not a duration such as "10s" or "1m30s"`, s)
	}
	if v <= 0 {
		return 0, fmt.Errorf("%q must be positive (leave the key out for its default)", s)
	}
	return v, nil
}

// Or is d, or def when d is unset.
func (d Duration) Or(def time.Duration) time.Duration { return cmp.Or(time.Duration(d), def) }

// Unmarshal is json.Unmarshal for plexus's config and the objects in it,
// with a value of the wrong type named by its key's path: "daemonWait":
// "soon" is not a duration, "modules.timeout": "-1s" must be positive,
// "daemonSocket": want string, got number.
func Unmarshal(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		te.Field = keyPath(te.Field)
	}
	switch {
	case !errors.As(err, &te) || te.Field == "" && te.Type != durationType:
		return err
	case te.Field == "":
		return errors.New(te.Value)
	case te.Type == durationType:
		return fmt.Errorf("%q: %s", te.Field, te.Value)
	}
	return fmt.Errorf("%q: want %s, got %s", te.Field, te.Type, te.Value)
}

// keyPath is encoding/json's path of a field as the config's keys, which
// all start in lower case: it drops the embedded structs' type names
// (CallSettings.logOptions.compress).
func keyPath(field string) string {
	isType := func(p string) bool { return p != "" && unicode.IsUpper(rune(p[0])) }
	return strings.Join(slices.DeleteFunc(strings.Split(field, "."), isType), ".")
}

// DefaultWait is how long an ADD waits for plexusd when daemonWait is not set.
const DefaultWait = 10 * time.Second

// Daemon holds the keys of thick mode: where plexusd listens, and how long
// an ADD waits for it. config.Config has the same fields.
type Daemon struct {
	// DaemonSocket switches the plugin to a forwarder to plexusd at this
	// unix socket.
	DaemonSocket string   `json:"daemonSocket,omitempty"`
	DaemonWait   Duration `json:"daemonWait,omitempty"`
}

// Parse reads and checks daemonSocket and daemonWait from a plexus config;
// plexusd checks the rest when it serves the call.
func Parse(stdin []byte) (*Daemon, error) {
	d := &Daemon{}
	if err := Decode(stdin, d); err != nil {
		return nil, err
	}
	if err := d.Check(); err != nil {
		return nil, fmt.Errorf("plexus config: %w", err)
	}
	return d, nil
}

// Wait is daemonWait, or its default.
func (d *Daemon) Wait() time.Duration { return d.DaemonWait.Or(DefaultWait) }

// Check checks daemonSocket.
func (d *Daemon) Check() error {
	if d.DaemonSocket != "" && d.DaemonSocket[0] != '/' { // absolute (Linux)
		return errors.New(`"daemonSocket" ` + strconv.Quote(d.DaemonSocket) + " must be an absolute path")
	}
	return nil
}

// Decode decodes a plexus config into v (Unmarshal), refusing a non-object.
func Decode(stdin []byte, v any) error {
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
