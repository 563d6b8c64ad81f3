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

// plexus's own CNI error codes (100 and above); Table describes them.
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

// Code is one of plexus's CNI error codes: its name here and what it
// means, as docs/configuration.md's table of error codes begins to say it.
type Code struct {
	Code    uint
	Name    string
	Meaning string
}

// Table lists plexus's own CNI error codes in order.
func Table() []Code {
	return []Code{
		{InvalidSelection, "InvalidSelection", "invalid selection annotation"},
		{NetworkNotFound, "NetworkNotFound", "a NAD is missing or cannot be resolved"},
		{PolicyDenied, "PolicyDenied", "denied by policy (s7.4)"},
		{Extension, "Extension", "an extension rejected or failed the attachment"},
		{AttachFailed, "AttachFailed", "a delegate ADD failed"},
		{NotHonored, "NotHonored", "requested ips or mac were not assigned"},
		{PodLookup, "PodLookup", "the pod could not be read"},
		{Status, "Status", "network-status could not be published"},
		{Record, "Record", "the attachment record could not be written"},
		{DetachFailed, "DetachFailed", "one or more delegate DELs failed"},
		{CheckFailed, "CheckFailed", "a delegate CHECK failed"},
		{InterfaceConflict, "InterfaceConflict", "a requested interface name is already used"},
		{ClusterNetwork, "ClusterNetwork", "the default network cannot be loaded"},
		{GarbageCollection, "GarbageCollection", "GC could not finish"},
		{DefaultNotReady, "DefaultNotReady", "STATUS: the default network is not ready"},
		{DaemonUnreachable, "DaemonUnreachable", "thick mode: plexusd could not be reached"},
		{DefaultRoute, "DefaultRoute", "default-route could not be applied"},
		{Devices, "Devices", "the pod's devices"},
	}
}

// Exit statuses of plexus's programs. A plugin exits ExitFail with its
// CNI error on stdout.
const (
	ExitOK     = 0
	ExitFail   = 1  // an error, or a check that did not pass
	ExitDenied = 2  // plexusctl policy eval: the policy denied
	ExitUsage  = 64 // bad flags or arguments (sysexits' EX_USAGE)
)
