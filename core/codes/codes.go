// Package codes is how plexus's programs say why they failed: the CNI
// error codes of the plugin, the shim and plexusd, and the exit statuses
// of its commands. It imports nothing, so the shim links it for free.
package codes

// The CNI specification's codes plexus returns itself.
const (
	InvalidEnvironment   uint = 4   // bad CNI_* variables
	InvalidNetworkConfig uint = 7   // the config is refused
	Internal             uint = 999 // anything else
)

// plexus's own CNI error codes (100 and above); docs/configuration.md
// describes them (codes_test.go checks it).
const (
	InvalidSelection  uint = 100
	NetworkNotFound   uint = 101
	PolicyDenied      uint = 102
	Extension         uint = 103
	AttachFailed      uint = 104
	NotHonored        uint = 105
	PodLookup         uint = 106
	Status            uint = 107
	Record            uint = 108
	DetachFailed      uint = 109
	CheckFailed       uint = 110
	InterfaceConflict uint = 111
	ClusterNetwork    uint = 112
	GarbageCollection uint = 113
	DefaultNotReady   uint = 114
	DaemonUnreachable uint = 115
	DefaultRoute      uint = 116
	Devices           uint = 117
)

// Exit statuses of plexus's programs. A plugin exits ExitFail with its
// CNI error on stdout.
const (
	ExitOK     = 0
	ExitFail   = 1  // an error, or a check that did not pass
	ExitDenied = 2  // plexusctl policy eval: the policy denied
	ExitUsage  = 64 // bad flags or arguments (sysexits' EX_USAGE)
)
