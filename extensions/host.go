package extensions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"

	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/sdk/abi"
)

// Host runs the configured modules as the prepare and enrich stages. New
// reads only the declarations; a module is compiled and instantiated when
// an attachment first needs it (one CNI call needs only the modules owning
// its keys), or up front by LoadAll in a long-running daemon.
type Host struct {
	modules     []*module // in config order, which is also call order
	unownedFail bool
	isolate     bool
}

var (
	_ pipeline.Preparer = (*Host)(nil)
	_ pipeline.Enricher = (*Host)(nil)
)

// HookError is a module's failure or rejection; it names the module, the
// hook and the reason.
type HookError struct {
	Module   string
	Hook     string
	Rejected bool
	Err      error
}

func (e *HookError) Error() string {
	if e.Rejected {
		return fmt.Sprintf("extension %q rejected the attachment (%s): %v", e.Module, e.Hook, e.Err)
	}
	return fmt.Sprintf("extension %q, hook %s: %v", e.Module, e.Hook, e.Err)
}

func (e *HookError) Unwrap() error { return e.Err }

// New validates cfg and reads every module's declaration, refusing a module
// without a valid one, with a forbidden import, or owning another's prefix:
// alone with cfg.Isolate (see Config.Isolate), else with the host.
func New(ctx context.Context, cfg Config) (*Host, error) {
	// newModule checks each module's own keys, as Config.validate does.
	if err := cfg.validateHost(); err != nil {
		return nil, err
	}
	var cache wazero.CompilationCache
	if dir := cfg.CacheDir; dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("extensions cache dir: %w", err)
		}
		c, err := wazero.NewCompilationCacheWithDir(dir)
		if err != nil {
			return nil, fmt.Errorf("extensions cache dir %s: %w", dir, err)
		}
		cache = c
	}
	h := &Host{unownedFail: cfg.UnownedKeys == PolicyFail, isolate: cfg.Isolate}
	for i := range cfg.Modules {
		m, err := newModule(&cfg, i, cache)
		if err != nil && !cfg.Isolate {
			return nil, err
		}
		h.modules = append(h.modules, m)
	}
	h.refuseClashes()
	if refused := h.Refused(); !cfg.Isolate && len(refused) > 0 {
		return nil, refused[0]
	}
	return h, nil
}

// newModule reads module i's config and declaration. On error the module
// is returned refused, with what could be read.
func newModule(cfg *Config, i int, cache wazero.CompilationCache) (*module, error) {
	mc := &cfg.Modules[i]
	lim, limErr := mc.limits()
	m := &module{
		path: mc.Path, decl: &Declaration{}, config: mc.Config, lim: lim, cache: cache, dir: cfg.CacheDir,
		longLived: cfg.LongLived,
	}
	// The limits' error comes first, as from Config.validate; the
	// declaration is read anyway, so that a refused module still owns its
	// keys (Config.Isolate).
	decl, err := ReadDeclaration(mc.Path)
	if err == nil {
		m.decl = decl
	}
	switch {
	case limErr != nil:
		err = fmt.Errorf("extensions: module %d (%s): %w", i, mc.Path, limErr)
	case err != nil:
		err = fmt.Errorf("extension module %s: %w", mc.Path, err)
	}
	m.refused = err
	return m, err
}

// refuseClashes refuses, in config order, each module whose name or keys
// clash with an earlier module not refused, so adding a module never takes
// keys from one already working.
func (h *Host) refuseClashes() {
	for i, m := range h.modules {
		if m.refused != nil {
			continue
		}
		for _, prev := range h.modules[:i] {
			if prev.refused != nil {
				continue
			}
			if err := clash(&prev.decl.Manifest, &m.decl.Manifest); err != nil {
				m.refused = fmt.Errorf("extensions: %w; module %q (%s) refused", err, m.name(), m.path)
				break
			}
		}
	}
}

// ReadDeclaration reads and validates a module's declaration, imports and
// exports without compiling it.
func ReadDeclaration(path string) (*Declaration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > MaxModuleBytes {
		return nil, fmt.Errorf("module is %d bytes, more than the %d plexus loads", st.Size(), MaxModuleBytes)
	}
	return declare(f, st.Size())
}

// Declarations returns the declarations in config order; a module whose
// declaration could not be read (a refused one) has an empty one.
func (h *Host) Declarations() []*Declaration {
	out := make([]*Declaration, len(h.modules))
	for i, m := range h.modules {
		out[i] = m.decl
	}
	return out
}

// ModuleState is one configured module as the host holds it: what was
// read from its file, whether it is loaded, and why it was refused.
type ModuleState struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Path    string `json:"path"`
	// SHA256 is the hex digest of the module file (of the bytes compiled,
	// once loaded); empty when the file cannot be read.
	SHA256 string `json:"sha256,omitempty"`
	// Loaded: compiled and instantiated (LoadAll, or a first call).
	Loaded bool `json:"loaded"`
	// Err is why the module was refused; a refused module never runs.
	Err string `json:"error,omitempty"`
}

// Modules returns every configured module's state, in config order.
func (h *Host) Modules() []ModuleState {
	out := make([]ModuleState, len(h.modules))
	for i, m := range h.modules {
		out[i] = m.state()
	}
	return out
}

// LoadAll compiles and instantiates every module now. A host built with
// Config.Isolate refuses a module that fails and returns nil; see Refused.
func (h *Host) LoadAll(ctx context.Context) error {
	for _, m := range h.modules {
		if m.refused != nil {
			continue
		}
		m.mu.Lock()
		_, err := m.instance(ctx)
		m.mu.Unlock()
		switch {
		case err != nil && h.isolate:
			m.refused = fmt.Errorf("extension %q: %w", m.name(), err)
			_ = m.close(ctx)
		case err != nil:
			return fmt.Errorf("extension %q: %w", m.name(), err)
		}
	}
	return nil
}

// Refused returns the refusal of each refused module, in config order.
func (h *Host) Refused() []error {
	var out []error
	for _, m := range h.modules {
		if m.refused != nil {
			out = append(out, m.refused)
		}
	}
	return out
}

// Close releases every module's runtime.
func (h *Host) Close(ctx context.Context) error {
	var errs []error
	for _, m := range h.modules {
		errs = append(errs, m.close(ctx))
	}
	return errors.Join(errs...)
}

// owner is the module owning key, or nil. A module that runs comes before
// a refused one whose prefixes overlap it (refuseClashes).
func (h *Host) owner(key string) *module {
	var refused *module
	for _, m := range h.modules {
		if !ownsKey(m.decl, key) {
			continue
		}
		if m.refused == nil {
			return m
		}
		if refused == nil {
			refused = m
		}
	}
	return refused
}

// partition splits a selection element's reverse-domain keys (s4.1.2.1)
// by owner and returns the keys nobody owns.
func (h *Host) partition(keys map[string]json.RawMessage) (map[*module]map[string]json.RawMessage, []string) {
	groups := map[*module]map[string]json.RawMessage{}
	var unowned []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		m := h.owner(k)
		if m == nil {
			unowned = append(unowned, k)
			continue
		}
		if groups[m] == nil {
			groups[m] = map[string]json.RawMessage{}
		}
		groups[m][k] = keys[k]
	}
	return groups, unowned
}

// invoke encodes input, runs the hook and decodes its output. A refused
// module fails every call, each through the hook's failure policy.
func (m *module) invoke(ctx context.Context, hook string, input any) (*wireOutput, error) {
	if m.refused != nil {
		return nil, fmt.Errorf("module refused at load: %w", m.refused)
	}
	in, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("encoding input: %w", err)
	}
	b, err := m.call(ctx, hook, in)
	if err != nil {
		return nil, err
	}
	return decodeOutput(b)
}

// failed applies the hook's failure policy: "fail" returns the error,
// "ignore" warns and lets the attachment go on unchanged.
func (m *module) failed(hook string, err error, warn func(string)) error {
	he := &HookError{Module: m.name(), Hook: hook, Err: err}
	policy := m.lim.prepareFailure
	if hook == abi.HookEnrich {
		policy = m.lim.enrichFailure
	}
	if policy != PolicyIgnore { // an invalid policy (a refused module's) fails
		return he
	}
	warn(he.Error() + " (ignored by the module's failure policy)")
	return nil
}

func warner(w func(string)) func(string) {
	if w == nil {
		return func(string) {}
	}
	return w
}

// Caps on what one hook call may hand to the pod's owner and its status
// (sdk/ABI.md, "Limits and failures"). Each warning becomes part of an
// Event and a log line, and each status value part of a pod annotation,
// all written to the API server: a module may not flood either.
const (
	maxWarnings        = 5
	maxWarningBytes    = 512
	maxStatusKeys      = 16
	maxStatusValue     = 4 << 10
	maxStatusCallBytes = 16 << 10
)

// relayWarnings relays a call's first maxWarnings warnings, each cut to
// maxWarningBytes, as one message (one Event); DroppedWarnings counts the rest.
func (m *module) relayWarnings(hook string, ws []string, warn func(string)) {
	if len(ws) == 0 {
		return
	}
	shown := ws[:min(len(ws), maxWarnings)]
	parts := make([]string, len(shown))
	for i, w := range shown {
		parts[i] = names.Truncate(w, maxWarningBytes)
	}
	msg := fmt.Sprintf("extension %q (%s): %s", m.name(), hook, strings.Join(parts, "; "))
	if extra := len(ws) - len(shown); extra > 0 {
		m.dropped.Add(uint64(extra))
		msg += fmt.Sprintf(" (%d more warnings not shown)", extra)
	}
	warn(msg)
}

// DroppedWarnings counts the warnings modules returned past the cap of
// one call, since the host was built.
func (h *Host) DroppedWarnings() uint64 {
	var n uint64
	for _, m := range h.modules {
		n += m.dropped.Load()
	}
	return n
}
