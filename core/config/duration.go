package config

import "github.com/plexus-cni/plexus/core/config/daemonconf"

// Duration is the type of every duration key in plexus's config
// (daemonconf.Duration).
type Duration = daemonconf.Duration

// DefaultDaemonWait is how long an ADD waits for plexusd by default.
const DefaultDaemonWait = daemonconf.DefaultWait

// Unmarshal is json.Unmarshal naming a bad value by its key (daemonconf.Unmarshal).
func Unmarshal(data []byte, v any) error { return daemonconf.Unmarshal(data, v) }
