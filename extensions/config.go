package extensions

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/plexus-cni/plexus/core/config"
)

// Failure policies.
const (
	PolicyFail   = "fail"
	PolicyIgnore = "ignore"
)

// Defaults for a module whose config leaves them out.
const (
	DefaultMemoryLimitPages = 1024 // 64 MiB; a small Go guest uses a few MiB
	DefaultTimeout          = time.Second
	DefaultMaxOutputBytes   = 1 << 20
	wasmPageSize            = 64 << 10
	maxMemoryLimitPages     = 65536 // the 4 GiB of a 32-bit memory
	// MaxTableEntries bounds the entries of a module's tables together
	// (wasmbin.BoundTables): wazero keeps tables in host memory, 8 bytes an
	// entry, outside the memory cap, and a Go module declares no maximum.
	// 2^20 entries are 8 MiB; a Go module's table holds one entry per
	// function (about 6,300 in the examples) and never grows. It is a
	// constant so that the bounded bytes, wazero's cache key, are the same
	// under any memory cap: a cache warmed with plexusctl serves every config.
	MaxTableEntries = 1 << 20
	// MaxModuleBytes bounds a module file (a Go wasip1 module is a few MiB);
	// wasmfmt.CheckLimits keeps wazero's cost a small multiple of it.
	MaxModuleBytes = 64 << 20
)

// Config is the "extensions" key of plexus's plugin config.
type Config struct {
	Modules []ModuleConfig `json:"modules"`
	// UnownedKeys says what a reverse-domain selection key that no module
	// owns does: "ignore" (default: warn) or "fail".
	UnownedKeys string `json:"unownedKeys,omitempty"`
	// CacheDir holds wazero's compiled modules between processes; empty
	// means compile in every process.
	CacheDir string `json:"cacheDir,omitempty"`
	// LongLived is set by a host that serves many calls (plexusd): its
	// modules get wasmbin.AddDeadlineCheck, cheaper per call than wazero's
	// per-iteration context check at the price of a rewrite per load
	// (wasmbin.NewRuntime says why). A thin plugin, and plexusd for a module
	// the rewriter refuses (sdk/ABI.md), keep wazero's check.
	LongLived bool `json:"-"`
	// Isolate refuses a module that fails its checks (config, declaration,
	// limits, a clash with a module before it, compilation, instantiation)
	// instead of the whole host: plexusd runs on with the others, and
	// Host.Modules and Host.Refused say why. A refused module whose
	// declaration was read still owns its keys, and each call on them fails
	// by its failure policy (Host.Prepare). Without Isolate (the plugin,
	// plexusctl) any failure fails New or LoadAll.
	Isolate bool `json:"-"`
}

// ModuleConfig configures one module.
type ModuleConfig struct {
	Path string `json:"path"`
	// Config is handed to the module's hooks as "moduleConfig".
	Config json.RawMessage `json:"config,omitempty"`
	// MemoryLimitPages (64 KiB each) or MemoryLimit ("64Mi") caps the
	// module's memory; set at most one.
	MemoryLimitPages uint32 `json:"memoryLimitPages,omitempty"`
	MemoryLimit      string `json:"memoryLimit,omitempty"`
	// Timeout is the deadline of one hook call, e.g. "500ms".
	Timeout Duration `json:"timeout,omitempty"`
	// MaxOutputBytes caps what one hook call may return.
	MaxOutputBytes int `json:"maxOutputBytes,omitempty"`
	// PrepareFailure and EnrichFailure are "fail" or "ignore"; a failure is
	// a trap, timeout, error result or ABI violation. A rejection always
	// fails the attachment.
	PrepareFailure string `json:"prepareFailure,omitempty"`
	EnrichFailure  string `json:"enrichFailure,omitempty"`
}

// Duration is the config's duration type (a Go duration string in JSON).
type Duration = config.Duration

// ParseConfig reads the "extensions" key from a plugin config; absent
// means no extensions.
func ParseConfig(pluginConf []byte) (Config, error) {
	var top struct {
		Extensions *Config `json:"extensions"`
	}
	if err := config.Unmarshal(pluginConf, &top); err != nil {
		return Config{}, fmt.Errorf("plugin config: %w", err)
	}
	if top.Extensions == nil {
		return Config{}, nil
	}
	return *top.Extensions, top.Extensions.validate()
}

func (c *Config) validate() error {
	if err := c.validateHost(); err != nil {
		return err
	}
	for i := range c.Modules {
		if _, err := c.Modules[i].limits(); err != nil {
			return fmt.Errorf("extensions: module %d (%s): %w", i, c.Modules[i].Path, err)
		}
	}
	return nil
}

// validateHost checks the keys that are not one module's.
func (c *Config) validateHost() error {
	switch c.UnownedKeys {
	case "", PolicyIgnore, PolicyFail:
		return nil
	}
	return fmt.Errorf("extensions: unownedKeys %q must be %q or %q", c.UnownedKeys, PolicyIgnore, PolicyFail)
}

// limits is a module config with defaults applied.
type limits struct {
	memoryPages    uint32
	timeout        time.Duration
	maxOutput      int
	prepareFailure string
	enrichFailure  string
}

func (m *ModuleConfig) limits() (limits, error) {
	l := limits{
		memoryPages: DefaultMemoryLimitPages, timeout: DefaultTimeout, maxOutput: DefaultMaxOutputBytes,
		prepareFailure: PolicyFail, enrichFailure: PolicyIgnore,
	}
	if m.Path == "" {
		return l, fmt.Errorf("path is required")
	}
	pages, err := m.memoryPages()
	if err != nil {
		return l, err
	}
	l.memoryPages = cmp.Or(pages, l.memoryPages)
	l.timeout = m.Timeout.Or(l.timeout)
	if m.MaxOutputBytes < 0 {
		return l, fmt.Errorf("maxOutputBytes must not be negative")
	}
	l.maxOutput = cmp.Or(m.MaxOutputBytes, l.maxOutput)
	if l.prepareFailure, err = policy("prepareFailure", m.PrepareFailure, l.prepareFailure); err != nil {
		return l, err
	}
	l.enrichFailure, err = policy("enrichFailure", m.EnrichFailure, l.enrichFailure)
	return l, err
}

func policy(field, v, def string) (string, error) {
	switch v {
	case "":
		return def, nil
	case PolicyFail, PolicyIgnore:
		return v, nil
	}
	return "", fmt.Errorf("%s %q must be %q or %q", field, v, PolicyFail, PolicyIgnore)
}

func (m *ModuleConfig) memoryPages() (uint32, error) {
	if m.MemoryLimit != "" && m.MemoryLimitPages != 0 {
		return 0, fmt.Errorf("set memoryLimit or memoryLimitPages, not both")
	}
	pages := m.MemoryLimitPages
	if m.MemoryLimit != "" {
		b, err := parseBytes(m.MemoryLimit)
		if err != nil {
			return 0, fmt.Errorf("memoryLimit: %w", err)
		}
		if b%wasmPageSize != 0 {
			return 0, fmt.Errorf("memoryLimit %q is not a multiple of the 64Ki wasm page", m.MemoryLimit)
		}
		pages = uint32(min(b/wasmPageSize, maxMemoryLimitPages+1))
	}
	if pages > maxMemoryLimitPages {
		return 0, fmt.Errorf("memory limit above 4Gi")
	}
	return pages, nil
}

// parseBytes reads "1048576", "512Ki", "64Mi" or "1Gi".
func parseBytes(s string) (uint64, error) {
	mult := uint64(1)
	for suffix, m := range map[string]uint64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
			break
		}
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte count like \"64Mi\"", s)
	}
	return n * mult, nil
}
