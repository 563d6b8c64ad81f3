package extensions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/status"
	"github.com/plexus-cni/plexus/sdk/abi"
)

// The logic of "plexusctl ext": inspect a module, run one hook as plexus
// would, fill the compilation cache.

// Check runs on a module file every check plexusd runs before serving it:
// size, declaration (ABI version, name, prefixes, hooks, imports,
// exports), limits (wasmfmt.CheckLimits), compilation, and instantiation
// under the default limits. It returns the declaration and the bytes
// checked, so that what is packed is what was checked.
func Check(ctx context.Context, path string) (*Declaration, []byte, error) {
	wasm, err := readModule(path)
	if err != nil {
		return nil, nil, err
	}
	decl, err := declare(bytes.NewReader(wasm), int64(len(wasm)))
	if err != nil {
		return nil, nil, err
	}
	lim, _ := (&ModuleConfig{Path: path}).limits() // the defaults
	m := &module{path: path, decl: decl, lim: lim, wasm: wasm, longLived: true}
	defer m.close(ctx)
	m.mu.Lock()
	_, err = m.instance(ctx)
	m.mu.Unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("module %q: %w", decl.Name, err)
	}
	return decl, wasm, nil
}

// Inspect writes a module's declaration, imports and exports as JSON.
func Inspect(w io.Writer, path string) error {
	d, err := ReadDeclaration(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writeJSON(w, d)
}

// RunOptions say how RunHook sandboxes the module.
type RunOptions struct {
	Hook   string
	Input  []byte // a hook input document (sdk/ABI.md)
	Module ModuleConfig
}

// RunHook runs one hook through plexus's host on an attachment built from
// the input document, and writes what plexus would make of the answer:
// config and args, or status entry, with the warnings and any error.
func RunHook(ctx context.Context, w io.Writer, path string, opt RunOptions) error {
	mc := opt.Module
	mc.Path = path
	if len(mc.Config) == 0 {
		var probe struct {
			ModuleConfig json.RawMessage `json:"moduleConfig"`
		}
		_ = json.Unmarshal(opt.Input, &probe)
		mc.Config = probe.ModuleConfig
	}
	mc.PrepareFailure, mc.EnrichFailure = PolicyFail, PolicyFail
	h, err := New(ctx, Config{Modules: []ModuleConfig{mc}})
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	switch opt.Hook {
	case abi.HookPrepare:
		return runPrepare(ctx, w, h, opt.Input)
	case abi.HookEnrich:
		return runEnrich(ctx, w, h, opt.Input)
	}
	return fmt.Errorf("unknown hook %q (want %s or %s)", opt.Hook, abi.HookPrepare, abi.HookEnrich)
}

type runReport struct {
	Config     json.RawMessage `json:"config,omitempty"`
	CNIArgs    [][2]string     `json:"cniArgs,omitempty"`
	ConfigArgs map[string]any  `json:"configArgs,omitempty"`
	Status     *status.Entry   `json:"status,omitempty"`
	Warnings   []string        `json:"warnings,omitempty"`
	Error      string          `json:"error,omitempty"`
}

func runPrepare(ctx context.Context, w io.Writer, h *Host, input []byte) error {
	var in abi.PrepareRequest
	if err := json.Unmarshal(input, &in); err != nil {
		return fmt.Errorf("input: %w", err)
	}
	a := attachmentOf(&in.Request)
	a.Config, a.ConfigArgs = in.Config, in.ConfigArgs
	for _, k := range slices.Sorted(maps.Keys(in.CNIArgs)) {
		a.CNIArgs = append(a.CNIArgs, [2]string{k, in.CNIArgs[k]})
	}
	rep := &runReport{}
	req := &pipeline.PrepareRequest{Pod: podOf(&in.Request), Attachment: a, Warn: rep.warn}
	err := h.Prepare(ctx, req)
	rep.Config, rep.CNIArgs, rep.ConfigArgs = a.Config, a.CNIArgs, a.ConfigArgs
	return rep.finish(w, err)
}

func runEnrich(ctx context.Context, w io.Writer, h *Host, input []byte) error {
	var in enrichInput
	if err := json.Unmarshal(input, &in); err != nil {
		return fmt.Errorf("input: %w", err)
	}
	a := attachmentOf(&in.Request)
	if len(in.Result) > 0 {
		r, err := types100.NewResult(in.Result)
		if err != nil {
			return fmt.Errorf("input result: %w", err)
		}
		a.Result = r
	}
	if in.NADAnnotations != nil {
		a.NAD = &source.NAD{ObjectMeta: metav1.ObjectMeta{
			Namespace: in.Network.Namespace, Name: in.Network.Name, Annotations: in.NADAnnotations,
		}}
	}
	entry := &status.Entry{Name: a.Name}
	if len(in.Status) > 0 {
		if err := json.Unmarshal(in.Status, entry); err != nil {
			return fmt.Errorf("input status: %w", err)
		}
	}
	rep := &runReport{}
	err := h.Enrich(ctx, &pipeline.EnrichRequest{Pod: podOf(&in.Request), Attachment: a, Entry: entry, Warn: rep.warn})
	rep.Status = entry
	return rep.finish(w, err)
}

func (r *runReport) warn(msg string) { r.Warnings = append(r.Warnings, msg) }

// finish writes the report; the hook's error is part of it and is also
// returned so the command exits non-zero.
func (r *runReport) finish(w io.Writer, err error) error {
	if err != nil {
		r.Error = err.Error()
	}
	if werr := writeJSON(w, r); werr != nil {
		return werr
	}
	return err
}

func attachmentOf(c *abi.Request) *pipeline.Attachment {
	a := &pipeline.Attachment{
		Index: c.Network.Index, Default: c.Network.Default, Name: c.Network.StatusName, IfName: c.IfName,
	}
	if !c.Network.Default {
		a.Selection = &selection.Element{
			Index: c.Network.Index, Name: c.Network.Name, Namespace: c.Network.Namespace,
			Extensions: c.Keys,
		}
	}
	return a
}

func podOf(c *abi.Request) *source.Pod {
	return &source.Pod{Namespace: c.Pod.Namespace, Name: c.Pod.Name, UID: c.Pod.UID}
}

// Warm compiles each module (a .wasm file, or a directory of them) into
// the compilation cache in cacheDir, for thin-mode CNI calls to load.
func Warm(ctx context.Context, cacheDir string, paths ...string) ([]string, error) {
	if cacheDir == "" {
		return nil, errors.New("a cache directory is required")
	}
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		found := []string{p}
		if st.IsDir() {
			if found, err = filepath.Glob(filepath.Join(p, "*.wasm")); err != nil {
				return nil, err
			}
		}
		files = append(files, found...)
	}
	if len(files) == 0 {
		return nil, errors.New("no .wasm modules given")
	}
	mods := make([]ModuleConfig, len(files))
	for i, f := range files {
		mods[i] = ModuleConfig{Path: f}
	}
	h, err := New(ctx, Config{Modules: mods, CacheDir: cacheDir})
	if err != nil {
		return nil, err
	}
	defer h.Close(ctx)
	for _, m := range h.modules {
		m.mu.Lock()
		err := m.load(ctx)
		m.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("extension %q: %w", m.name(), err)
		}
	}
	return files, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
