package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// Duration is the type of every duration key in plexus's config (apiTimeout,
// apiBudget, delegateTimeout, daemonWait, the policy's deadline, an
// extension's timeout): a Go duration string in JSON ("500ms", "1m30s"),
// positive. A key left out is zero, which means its default. A bare number
// is refused: its unit would be a guess.
type Duration time.Duration

var durationType = reflect.TypeFor[Duration]()

// MarshalJSON writes the duration as a string such as "50ms".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string; null leaves d as it is, as it
// does any other value. A bad value is a *json.UnmarshalTypeError, which
// encoding/json completes with the key's path, and Unmarshal turns into
// "key": why.
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
func (d Duration) Or(def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return time.Duration(d)
}

// Unmarshal is json.Unmarshal for plexus's config and the objects in it,
// with a bad duration named by its key's path: "daemonWait": "soon" is not
// a duration, "modules.timeout": "-1s" must be positive.
func Unmarshal(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Type != durationType {
		return err
	}
	if te.Field == "" {
		return errors.New(te.Value)
	}
	return fmt.Errorf("%q: %s", te.Field, te.Value)
}
