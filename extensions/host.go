package extensions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/tetratelabs/wazero"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/sdk/abi"
)

// Host runs the configured modules as the prepare and enrich stages.
// New reads only the modules' declarations; a module is compiled and
// instantiated the first time an attachment needs it (thin mode: one CNI
// call needs only the modules owning its keys). LoadAll does all of it up
// front for a long-running daemon.
type Host struct {
	modules     []*module // in config order, which is also call order
	unownedFail bool
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
// without a valid one, with a forbidden import, or owning a prefix another
// module owns too.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cache, err := openCache(cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	h := &Host{unownedFail: cfg.UnownedKeys == PolicyFail}
	var manifests []*Manifest
	for i := range cfg.Modules {
		mc := &cfg.Modules[i]
		decl, err := ReadDeclaration(mc.Path)
		if err != nil {
			return nil, fmt.Errorf("extension module %s: %w", mc.Path, err)
		}
		lim, _ := mc.limits() // validated above
		h.modules = append(h.modules, &module{
			path: mc.Path, decl: decl, config: mc.Config, lim: lim, cache: cache, dir: cfg.CacheDir,
			longLived: cfg.LongLived,
		})
		manifests = append(manifests, &decl.Manifest)
	}
	if err := checkOverlaps(manifests); err != nil {
		return nil, fmt.Errorf("extensions: %w", err)
	}
	return h, nil
}

func openCache(dir string) (wazero.CompilationCache, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("extensions cache dir: %w", err)
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("extensions cache dir %s: %w", dir, err)
	}
	return c, nil
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
	b, err := ParseBinary(f, st.Size())
	if err != nil {
		return nil, err
	}
	return declare(b)
}

// Modules returns the declarations in config order.
func (h *Host) Modules() []*Declaration {
	out := make([]*Declaration, len(h.modules))
	for i, m := range h.modules {
		out[i] = m.decl
	}
	return out
}

// LoadAll compiles and instantiates every module now.
func (h *Host) LoadAll(ctx context.Context) error {
	for _, m := range h.modules {
		m.mu.Lock()
		_, err := m.instance(ctx)
		m.mu.Unlock()
		if err != nil {
			return fmt.Errorf("extension %q: %w", m.name(), err)
		}
	}
	return nil
}

// Close releases every module's runtime.
func (h *Host) Close(ctx context.Context) error {
	var errs []error
	for _, m := range h.modules {
		errs = append(errs, m.close(ctx))
	}
	return errors.Join(errs...)
}

// owner is the module owning key, or nil.
func (h *Host) owner(key string) *module {
	for _, m := range h.modules {
		if ownsKey(m.decl, key) {
			return m
		}
	}
	return nil
}

// partition splits a selection element's reverse-domain keys (s4.1.2.1)
// by owner and returns the keys nobody owns.
func (h *Host) partition(keys map[string]json.RawMessage) (map[*module]map[string]json.RawMessage, []string) {
	groups := map[*module]map[string]json.RawMessage{}
	var unowned []string
	for _, k := range sortedKeys(keys) {
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

// invoke encodes input, runs the hook and decodes its output.
func (m *module) invoke(ctx context.Context, hook string, input any) (*wireOutput, error) {
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
	if policy == PolicyFail {
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

func (m *module) relayWarnings(hook string, ws []string, warn func(string)) {
	for _, w := range ws {
		warn(fmt.Sprintf("extension %q (%s): %s", m.name(), hook, w))
	}
}
