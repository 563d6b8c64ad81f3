// Package revision keeps a node's copy of an AttachmentPolicy: it
// verifies each revision the API shows (file names, sizes, compile with the
// rule library, the revision's own Rego tests, one timed decision) and only
// then activates it, by swapping a symbolic link. A revision that fails
// leaves the one in force deciding. plexusd (thick) and the installer
// (thin) share it; the directory it keeps survives their restarts.
//
// StateDir's layout:
//
//	active          symbolic link to .revisions/<revision>, swapped by rename
//	.revisions/     verified revisions, the newest few kept
//	.state.json     what is active, and the object's last onDelete
//
// Hidden names keep the thin installer's mirror of the image's policy
// files, which may share the directory, from touching them.
package revision

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/policies"
)

// Sources of the policy a node enforces (plexusapi.NodePolicy.Source).
const (
	SourceObject = "object" // a revision of the AttachmentPolicy
	// SourceDefaults: the config's defaultPaths, until a revision is active.
	SourceDefaults = "defaults"
	// SourceNone: the object was deleted with onDelete AllowAll.
	SourceNone = "none"
)

// Bounds on what a revision may hold, as the CRD states them (a node does
// not rely on the API server having checked).
const (
	MaxFiles      = 64 // per map, modules and data
	MaxFileBytes  = 256 << 10
	MaxTotalBytes = 3 << 20
	maxStateBytes = 64 << 10
	maxErrorBytes = 4000 // status.nodes[].error holds 4096
)

// File names allowed in spec.modules and spec.data: the CRD's CEL rules.
var (
	moduleName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,99}[.]rego$`)
	dataName   = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,99}[.](yaml|yml|json)$`)
	// revisionName is what may come back from .state.json as a directory name.
	revisionName = regexp.MustCompile(`^([0-9]{1,19}-[0-9a-f]{12}|defaults|none)$`)
)

const (
	activeLink   = "active"
	revisionsDir = ".revisions"
	stateFile    = ".state.json"
	defaultsRev  = "defaults"
	noneRev      = "none"
)

// Options configure a Syncer.
type Options struct {
	// Config is the "policy" key; Object must be set. Its Paths (the rule
	// library) are loaded with every revision.
	Config policies.Config
	// Keep is how many revisions besides the active one stay on disk, to
	// roll back to without a fetch; 3 when zero.
	Keep int
	// TestTimeout bounds a revision's Rego tests; 30s when zero.
	TestTimeout time.Duration
	// NewEngine and VerifyEngine build the engines: policies.New and this
	// package's Verify when nil, as a node does. A simulation of many
	// nodes in one process shares them by content.
	NewEngine    func(ctx context.Context, cfg policies.Config) (*policies.Engine, error)
	VerifyEngine func(ctx context.Context, cfg policies.Config, dir string, tests bool, testTimeout time.Duration) (*policies.Engine, int, error)
	Log          *slog.Logger
}

// State is what a node enforces, persisted in .state.json.
type State struct {
	Source      string    `json:"source"`
	Object      string    `json:"object,omitempty"`
	Generation  int64     `json:"generation,omitempty"`
	Revision    string    `json:"revision,omitempty"`
	Since       time.Time `json:"since"`
	TestsPassed int       `json:"testsPassed,omitempty"`
	// OnDelete is the onDelete of the object as last seen, so that a
	// deletion seen after a restart is handled as the admin asked.
	OnDelete string `json:"onDelete,omitempty"`
	// ObservedGeneration and Error are the last attempt's.
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	Error              string `json:"error,omitempty"`
	// Refused names the object refused last (refusalKey): the same object
	// and spec are not checked again, another object or spec is.
	Refused string `json:"refused,omitempty"`
	// dir is the active revision's directory.
	dir string
}

// Result is the outcome of Start, Apply or Delete.
type Result struct {
	// Engine decides with the policy in force; nil when every attachment
	// is allowed (SourceNone).
	Engine *policies.Engine
	State  State
	// Changed: the revision in force changed.
	Changed bool
	// Attempted: this call checked a generation not seen before (it was
	// activated, or refused with the error returned); false when it had
	// been seen, and nothing was done.
	Attempted bool
}

// Syncer keeps one node's revisions of one AttachmentPolicy.
type Syncer struct {
	o   Options
	obj policies.ObjectConfig
	mu  sync.Mutex
	st  State
	eng *policies.Engine
}

// New checks the options; nothing is read or written until Start.
func New(o Options) (*Syncer, error) {
	obj := o.Config.Object
	if obj == nil {
		return nil, errors.New(`policy config: no "object"`)
	}
	if obj.Name == "" || obj.StateDir == "" {
		return nil, errors.New(`policy config: "object" needs "name" and "stateDir"`)
	}
	if !filepath.IsAbs(obj.StateDir) {
		return nil, fmt.Errorf(`policy config: "object": "stateDir" %q is not an absolute path`, obj.StateDir)
	}
	for _, p := range obj.DefaultPaths {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf(`policy config: "object": "defaultPaths": %q is not an absolute path`, p)
		}
	}
	if o.Keep <= 0 {
		o.Keep = 3
	}
	if o.TestTimeout <= 0 {
		o.TestTimeout = 30 * time.Second
	}
	if o.NewEngine == nil {
		o.NewEngine = policies.New
	}
	if o.VerifyEngine == nil {
		o.VerifyEngine = Verify
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Syncer{o: o, obj: *obj}, nil
}

// ActivePath is the link to the active revision's directory, which the
// thin plugin's config names.
func (s *Syncer) ActivePath() string { return filepath.Join(s.obj.StateDir, activeLink) }

// Name is the AttachmentPolicy's name.
func (s *Syncer) Name() string { return s.obj.Name }

// State returns what is in force and the last attempt.
func (s *Syncer) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// Start puts in force what the state directory holds, without the API: the
// active revision, none after a deletion with AllowAll, or the
// defaultPaths, which also replace a revision that no longer compiles
// (the library changed with the image), as the state's error says.
func (s *Syncer) Start(ctx context.Context) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(filepath.Join(s.obj.StateDir, revisionsDir), 0o755); err != nil {
		return Result{}, fmt.Errorf("policy state: %w", err)
	}
	st, err := s.readState()
	if err != nil {
		s.o.Log.Warn("policy state unreadable; starting from the default policy", "err", err)
	}
	var prior error
	switch {
	case err == nil && st.Source == SourceNone:
		return s.activate(st, nil, noneRev)
	case err == nil && st.Source == SourceObject && st.Object == s.obj.Name:
		dir := filepath.Join(s.obj.StateDir, revisionsDir, st.Revision)
		eng, cerr := s.compile(ctx, dir)
		if cerr == nil {
			st.dir = dir
			s.st, s.eng = st, eng
			return s.swap(st.Revision, false)
		}
		prior = fmt.Errorf("revision %s no longer compiles: %w", st.Revision, cerr)
	}
	res, err := s.startDefaults(ctx, st.OnDelete)
	if err != nil {
		return res, err
	}
	if prior != nil {
		s.st.Error = names.Truncate(prior.Error(), maxErrorBytes)
		res.State = s.st
	}
	return res, nil
}

// startDefaults copies the defaultPaths afresh (the image may have changed
// them) and puts them in force.
func (s *Syncer) startDefaults(ctx context.Context, onDelete string) (Result, error) {
	files, err := readDefaults(s.obj.DefaultPaths)
	if err != nil {
		return Result{}, err
	}
	dir, err := s.materialize(defaultsRev, files)
	if err != nil {
		return Result{}, err
	}
	eng, err := s.compile(ctx, dir)
	if err != nil {
		return Result{}, fmt.Errorf("default policy: %w", err)
	}
	st := State{Source: SourceDefaults, Revision: defaultsRev, Since: time.Now().UTC(), OnDelete: onDelete}
	return s.activate(st, eng, defaultsRev)
}

// Apply verifies the object's revision, once, and activates it if it
// passes; if not, the revision in force stays and the error says why.
func (s *Syncer) Apply(ctx context.Context, p *plexusapi.AttachmentPolicy) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.Name != s.obj.Name {
		return s.result(false), fmt.Errorf("AttachmentPolicy %q is not the one this node follows (%q)", p.Name, s.obj.Name)
	}
	onDelete := cmp.Or(p.Spec.OnDelete, plexusapi.OnDeleteKeep)
	key := refusalKey(p)
	if s.st.Error != "" && s.st.Refused == key {
		return s.result(false), errors.New(s.st.Error) // already refused
	}
	res, err := s.verifyAndActivate(ctx, p, onDelete)
	if err != nil {
		// A refused revision changes nothing in force, onDelete included:
		// the object's deletion is handled as the revision in force says.
		s.st.ObservedGeneration, s.st.Error, s.st.Refused = p.Generation, names.Truncate(err.Error(), maxErrorBytes), key
		_ = s.writeState()
		res = s.result(false)
		res.Attempted = true
		return res, err
	}
	res.Attempted = res.Changed
	return res, nil
}

func (s *Syncer) verifyAndActivate(ctx context.Context, p *plexusapi.AttachmentPolicy, onDelete string) (Result, error) {
	files, err := SpecFiles(p)
	if err != nil {
		return Result{}, err
	}
	rev := Revision(p.Generation, files)
	if s.st.Source == SourceObject && s.st.Revision == rev {
		s.st.OnDelete, s.st.ObservedGeneration, s.st.Error, s.st.Refused = onDelete, p.Generation, "", ""
		return s.result(false), s.writeState()
	}
	dir, err := s.materialize(rev, files)
	if err != nil {
		return Result{}, err
	}
	eng, passed, err := s.o.VerifyEngine(ctx, s.o.Config, dir, HasTests(files), s.o.TestTimeout)
	if err != nil {
		_ = os.RemoveAll(dir)
		return Result{}, fmt.Errorf("revision %s: %s", rev, StripDir(err.Error(), dir, "(the revision)"))
	}
	st := State{
		Source: SourceObject, Object: p.Name, Generation: p.Generation, Revision: rev,
		Since: time.Now().UTC(), TestsPassed: passed, OnDelete: onDelete, ObservedGeneration: p.Generation,
	}
	return s.activate(st, eng, rev)
}

// refusalKey identifies what was refused: the object's UID (a re-created
// object is checked anew), its generation, and a digest of its spec.
func refusalKey(p *plexusapi.AttachmentPolicy) string {
	spec, _ := json.Marshal(p.Spec)
	sum := sha256.Sum256(spec)
	return fmt.Sprintf("%s/%d/%x", p.UID, p.Generation, sum[:8])
}

// Verify checks a revision's directory as a node does before activating
// it: every file compiles strictly with the library (cfg.Paths), its tests
// pass (if tests) within testTimeout, and a sample decision finishes in
// time. It returns the revision's engine and the tests passed.
func Verify(ctx context.Context, cfg policies.Config, dir string, tests bool, testTimeout time.Duration) (*policies.Engine, int, error) {
	cfg = revisionConfig(cfg, dir)
	// The engine parses only the modules its query can reach; every file
	// of a revision must compile, tests included.
	if err := policies.Check(ctx, cfg.Paths); err != nil {
		return nil, 0, err
	}
	eng, err := policies.New(ctx, cfg)
	if err != nil {
		return nil, 0, err
	}
	passed := 0
	if tests {
		if passed, err = runTests(ctx, cfg.Paths, dir, testTimeout); err != nil {
			return nil, 0, err
		}
	}
	took, err := eng.TimeSample(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("%w (took %s)", err, took.Round(time.Microsecond))
	}
	return eng, passed, nil
}

func runTests(ctx context.Context, paths []string, dir string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out bytes.Buffer
	sum, err := policies.RunTests(ctx, paths, policies.TestOptions{TestsUnder: dir, Timeout: timeout}, &out)
	if err != nil {
		return 0, fmt.Errorf("running its tests: %w", err)
	}
	if ctx.Err() != nil {
		return 0, fmt.Errorf("its tests did not finish within %s", timeout)
	}
	if sum.Fail > 0 || sum.Error > 0 {
		return 0, fmt.Errorf("%d of its tests failed, %d errored:\n%s", sum.Fail, sum.Error, out.String())
	}
	return sum.Pass, nil
}

// Delete handles the object's deletion as its last onDelete says: Keep
// leaves the policy in force, AllowAll puts none in force.
func (s *Syncer) Delete(ctx context.Context) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.Source != SourceObject || s.st.OnDelete != plexusapi.OnDeleteAllowAll {
		return s.result(false), nil
	}
	st := State{Source: SourceNone, Revision: noneRev, Since: time.Now().UTC(), OnDelete: s.st.OnDelete}
	return s.activate(st, nil, noneRev)
}

// activate makes rev's directory the active one, persists st and prunes.
func (s *Syncer) activate(st State, eng *policies.Engine, rev string) (Result, error) {
	if rev == noneRev {
		if _, err := s.materialize(noneRev, nil); err != nil {
			return Result{}, err
		}
	}
	st.dir = filepath.Join(s.obj.StateDir, revisionsDir, rev)
	s.st, s.eng = st, eng
	res, err := s.swap(rev, true)
	if err != nil {
		return res, err
	}
	if err := s.writeState(); err != nil {
		return res, err
	}
	s.prune(rev)
	s.o.Log.Info("policy activated", "object", s.obj.Name, "source", st.Source, "revision", rev)
	return res, nil
}

// swap points the active link at rev, through a new link and a rename.
func (s *Syncer) swap(rev string, changed bool) (Result, error) {
	tmp := filepath.Join(s.obj.StateDir, ".active.tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Join(revisionsDir, rev), tmp); err != nil {
		return Result{}, fmt.Errorf("policy state: %w", err)
	}
	if err := os.Rename(tmp, s.ActivePath()); err != nil {
		_ = os.Remove(tmp)
		return Result{}, fmt.Errorf("policy state: %w", err)
	}
	return s.result(changed), nil
}

func (s *Syncer) result(changed bool) Result {
	return Result{Engine: s.eng, State: s.st, Changed: changed}
}

// revisionConfig is the engine's config of a revision: the library
// (cfg.Paths) and the revision's directory.
func revisionConfig(cfg policies.Config, dir string) policies.Config {
	cfg.Object, cfg.Paths = nil, append(slices.Clone(cfg.Paths), dir)
	return cfg
}

// compile builds the engine of a revision: the library and its files.
func (s *Syncer) compile(ctx context.Context, dir string) (*policies.Engine, error) {
	return s.o.NewEngine(ctx, revisionConfig(s.o.Config, dir))
}

// materialize writes files into a fresh directory and renames it to
// .revisions/rev, replacing an older copy.
func (s *Syncer) materialize(rev string, files map[string][]byte) (string, error) {
	root := filepath.Join(s.obj.StateDir, revisionsDir)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("policy state: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".tmp-")
	if err != nil {
		return "", fmt.Errorf("policy state: %w", err)
	}
	// Gone once renamed into place; removed on every other way out.
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("policy state: %w", err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			return "", fmt.Errorf("policy state: %w", err)
		}
	}
	dir := filepath.Join(root, rev)
	if s.st.dir == dir {
		// The active revision's directory is never replaced in place.
		return dir, nil
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("policy state: %w", err)
	}
	return dir, nil
}

// prune removes all but the newest Keep revisions besides active, and
// leftovers of interrupted writes.
func (s *Syncer) prune(active string) {
	root := filepath.Join(s.obj.StateDir, revisionsDir)
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	type rev struct {
		name string
		mod  time.Time
	}
	var revs []rev
	for _, e := range entries {
		name := e.Name()
		if name == active {
			continue
		}
		if strings.HasPrefix(name, ".tmp-") || !revisionName.MatchString(name) {
			_ = os.RemoveAll(filepath.Join(root, name))
			continue
		}
		if info, err := e.Info(); err == nil {
			revs = append(revs, rev{name, info.ModTime()})
		}
	}
	slices.SortFunc(revs, func(a, b rev) int { return b.mod.Compare(a.mod) })
	for _, r := range revs[min(s.o.Keep, len(revs)):] {
		_ = os.RemoveAll(filepath.Join(root, r.name))
	}
}

func (s *Syncer) writeState() error {
	b, err := json.MarshalIndent(s.st, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(s.obj.StateDir, stateFile)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("policy state: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("policy state: %w", err)
	}
	return nil
}

// readState reads .state.json; the revision it names becomes a path only
// once it matches revisionName.
func (s *Syncer) readState() (State, error) {
	var st State
	p := filepath.Join(s.obj.StateDir, stateFile)
	b, err := readBounded(p, maxStateBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, fmt.Errorf("%s: %w", p, err)
	}
	if st.Revision != "" && !revisionName.MatchString(st.Revision) {
		return State{}, fmt.Errorf("%s: revision %q is not a revision name", p, st.Revision)
	}
	switch st.OnDelete {
	case "", plexusapi.OnDeleteKeep, plexusapi.OnDeleteAllowAll:
	default:
		return State{}, fmt.Errorf("%s: onDelete %q", p, st.OnDelete)
	}
	return st, nil
}

// Remove deletes what a Syncer keeps in stateDir (an uninstall), and
// nothing else there.
func Remove(stateDir string) error {
	var errs []error
	for _, n := range []string{activeLink, ".active.tmp", stateFile, stateFile + ".tmp", revisionsDir} {
		errs = append(errs, os.RemoveAll(filepath.Join(stateDir, n)))
	}
	return errors.Join(errs...)
}

// StripDir names files in msg as the object does, not by their path in
// dir, and dir itself as name.
func StripDir(msg, dir, name string) string {
	msg = strings.ReplaceAll(msg, dir+string(filepath.Separator), "")
	return strings.ReplaceAll(msg, dir, name)
}

// SpecFiles checks the object's file names and sizes and returns its files
// by name, modules and data in one directory as the loader reads them.
func SpecFiles(p *plexusapi.AttachmentPolicy) (map[string][]byte, error) {
	if len(p.Spec.Modules)+len(p.Spec.Data) == 0 {
		return nil, fmt.Errorf("AttachmentPolicy %q: spec has no modules and no data", p.Name)
	}
	switch p.Spec.OnDelete {
	case "", plexusapi.OnDeleteKeep, plexusapi.OnDeleteAllowAll:
	default:
		return nil, fmt.Errorf("AttachmentPolicy %q: spec.onDelete %q: want %s or %s", p.Name, p.Spec.OnDelete, plexusapi.OnDeleteKeep, plexusapi.OnDeleteAllowAll)
	}
	files := map[string][]byte{}
	total := 0
	for _, part := range []struct {
		field string
		m     map[string]string
		ok    func(string) bool
	}{
		{"modules", p.Spec.Modules, moduleName.MatchString},
		{"data", p.Spec.Data, dataName.MatchString},
	} {
		if len(part.m) > MaxFiles {
			return nil, fmt.Errorf("AttachmentPolicy %q: spec.%s has %d files, more than %d", p.Name, part.field, len(part.m), MaxFiles)
		}
		for name, text := range part.m {
			if !part.ok(name) {
				return nil, fmt.Errorf("AttachmentPolicy %q: spec.%s[%q]: not an allowed file name", p.Name, part.field, name)
			}
			if len(text) > MaxFileBytes {
				return nil, fmt.Errorf("AttachmentPolicy %q: spec.%s[%q]: %d bytes, more than %d", p.Name, part.field, name, len(text), MaxFileBytes)
			}
			total += len(text)
			files[name] = []byte(text)
		}
	}
	if total > MaxTotalBytes {
		return nil, fmt.Errorf("AttachmentPolicy %q: %d bytes of files, more than %d", p.Name, total, MaxTotalBytes)
	}
	return files, nil
}

// Revision names a revision: the object's generation and the first 12 hex
// digits of a SHA-256 over its files' sorted names and contents.
func Revision(generation int64, files map[string][]byte) string {
	return fmt.Sprintf("%d-%s", generation, Digest(files)[:12])
}

// Digest hashes files' names and contents in name order.
func Digest(files map[string][]byte) string {
	h := sha256.New()
	for _, n := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(files[n]))
		h.Write(files[n])
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// HasTests says whether files hold a *_test.rego module.
func HasTests(files map[string][]byte) bool {
	for n := range files {
		if strings.HasSuffix(n, "_test.rego") {
			return true
		}
	}
	return false
}

// readDefaults reads the defaultPaths: files, or directories whose files
// (not subdirectories) are taken, each with a name a revision may hold.
func readDefaults(paths []string) (map[string][]byte, error) {
	files := map[string][]byte{}
	total := 0
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf(`policy config: "defaultPaths": %w`, err)
		}
		found := []string{p}
		if info.IsDir() {
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, fmt.Errorf(`policy config: "defaultPaths": %w`, err)
			}
			found = nil
			for _, e := range entries {
				if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") && !strings.HasSuffix(e.Name(), "_test.rego") {
					found = append(found, filepath.Join(p, e.Name()))
				}
			}
		}
		for _, path := range found {
			name := filepath.Base(path)
			if !moduleName.MatchString(name) && !dataName.MatchString(name) {
				return nil, fmt.Errorf(`policy config: "defaultPaths": %s: not a .rego, .json, .yaml or .yml file with a plain name`, path)
			}
			if _, dup := files[name]; dup {
				return nil, fmt.Errorf(`policy config: "defaultPaths": two files named %s`, name)
			}
			b, err := readBounded(path, MaxFileBytes)
			if err != nil {
				return nil, fmt.Errorf(`policy config: "defaultPaths": %w`, err)
			}
			total += len(b)
			if total > MaxTotalBytes || len(files) >= 2*MaxFiles {
				return nil, fmt.Errorf(`policy config: "defaultPaths": more than %d files or %d bytes`, 2*MaxFiles, MaxTotalBytes)
			}
			files[name] = b
		}
	}
	return files, nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return b, nil
}
