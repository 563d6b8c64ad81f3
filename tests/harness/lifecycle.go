package harness

import (
	"fmt"
	"path/filepath"
	"reflect"
)

// The steps of a pod's life every suite checks: ADD, count what the
// sandbox holds, DEL, and that nothing is left.

// MustPlugin runs one call as a runtime does (Plugin) and ends the test
// when it fails; what says which call it was ("" for the command alone).
func (h *World) MustPlugin(c *Container, command, what string) string {
	h.t.Helper()
	out, e := h.Plugin(c, command)
	if e != nil {
		if what == "" {
			what = command
		}
		h.t.Fatalf("%s: %+v", what, e)
	}
	return out
}

// AssertInterfaces checks the sandbox holds n interfaces besides lo; want
// names them for the message.
func (h *World) AssertInterfaces(c *Container, n int, want string) {
	h.t.Helper()
	if got := IfNames(c.Links(h.t)); len(got) != n {
		h.t.Errorf("%s has interfaces %v, want %s", c.Name, got, want)
	}
}

// AssertIfNames checks the sandbox's interfaces besides lo, by name.
func (h *World) AssertIfNames(c *Container, want ...string) {
	h.t.Helper()
	if got := IfNames(c.Links(h.t)); !reflect.DeepEqual(got, want) {
		h.t.Errorf("%s has interfaces %v, want %v", c.Name, got, want)
	}
}

// DelDetached runs a DEL that must succeed (what as in MustPlugin) and
// checks it left nothing (AssertDetached).
func (h *World) DelDetached(c *Container, before map[string]bool, what string) {
	h.t.Helper()
	h.MustPlugin(c, "DEL", what)
	h.AssertDetached(c, before)
}

// AddDel is the whole life: an ADD that must succeed, n interfaces in the
// sandbox (want names them), a DEL that must succeed and leave nothing.
func (h *World) AddDel(c *Container, before map[string]bool, n int, want string) {
	h.t.Helper()
	h.MustPlugin(c, "ADD", "")
	h.AssertInterfaces(c, n, want)
	h.DelDetached(c, before, "")
}

// Pods makes n pods, pod-0 to pod-<n-1>, in namespace, each selecting
// networks, and their sandboxes.
func (h *World) Pods(namespace string, n int, networks string) []*Container {
	h.t.Helper()
	cs := make([]*Container, n)
	for i := range cs {
		name := fmt.Sprintf("pod-%d", i)
		h.Pod(namespace, name, networks)
		cs[i] = h.Container(namespace, name)
	}
	return cs
}

// AddAll and DelAll run every container's ADD or DEL at once through
// CNITool, as a runtime filling or draining a node does.
func (h *World) AddAll(cs []*Container) { h.all(cs, "add") }

// DelAll: see AddAll.
func (h *World) DelAll(cs []*Container) { h.all(cs, "del") }

func (h *World) all(cs []*Container, command string) {
	h.t.Helper()
	Parallel(h.t, cs, func(c *Container) error { _, err := h.CNITool(c, command); return err })
}

// AddRefused runs an ADD that must fail with code, its message naming
// every want, and leave nothing behind (AssertDetached); it returns the
// error for further checks.
func (h *World) AddRefused(c *Container, before map[string]bool, code uint, want ...string) *CNIError {
	h.t.Helper()
	_, e := h.Plugin(c, "ADD")
	AssertCNIError(h.t, e, code, want...)
	h.AssertDetached(c, before)
	return e
}

// UseLibraryPolicy enables the shipped rule library (policies/library)
// with admin as its configuration data, written to the file name in the
// World's directory; it returns that file's path.
func (h *World) UseLibraryPolicy(name, admin string) string {
	h.t.Helper()
	lib, err := filepath.Abs("../../policies/library") // from tests/<suite>
	Must(h.t, err)
	data := filepath.Join(h.Dir, name)
	h.WriteFile(data, admin)
	h.Set("policy", map[string]any{"paths": []string{lib, data}})
	return data
}
