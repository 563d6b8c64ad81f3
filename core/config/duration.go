package config

import "github.com/plexus-cni/plexus/core/config/daemonconf"

// Duration is the type of every duration key in plexus's config: a Go
// duration string in JSON ("500ms", "1m30s"), positive; unset is zero,
// which means the key's default. Bad values are named by their key.
type Duration = daemonconf.Duration

// DefaultDaemonWait is how long an ADD waits for plexusd by default.
const DefaultDaemonWait = daemonconf.DefaultWait

// Unmarshal is json.Unmarshal for plexus's config and the objects in it,
// with a bad duration named by its key's path: "daemonWait": "soon" is not
// a duration, "modules.timeout": "-1s" must be positive.
func Unmarshal(data []byte, v any) error { return daemonconf.Unmarshal(data, v) }
