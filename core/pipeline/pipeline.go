// Package pipeline runs the NPWG v1 pipeline for one CNI call: ADD, DEL,
// CHECK, GC and STATUS, delegating every attachment through libcni (s7.1).
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/lock"
	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/source"
)

// Pipeline is the pipeline with its configuration and collaborators.
type Pipeline struct {
	Config *config.Config
	// Source provides pods and NADs; nil attaches the default network only.
	Source  source.Source
	Stages  Stages
	CNI     libcni.CNI
	Records *record.Store
	// Deleted remembers finished DELs so a repeated DEL runs no delegate;
	// nil: every DEL without a record detaches from libcni's cache.
	Deleted *record.Tombstones
	Locks   *lock.Locker
	// Routes changes routes in the pod's namespace ("default-route");
	// nil refuses such requests.
	Routes Router
	// OnIgnored is called for every selection key an ADD ignores.
	OnIgnored func(key string)
	// Devices asks kubelet which devices a pod got; nil fails NADs naming
	// a resource.
	Devices DeviceLister
	// Exists tells whether a file exists on the node
	// (readinessindicatorfile); nil looks in this process's filesystem.
	Exists func(path string) (bool, error)
	// Log carries the call's "cmd", "container" and "ifName"; the
	// pipeline's lines add "interface" and never repeat those keys.
	Log *slog.Logger
}

// NetNSChecker is a Router that also tells whether a path names a network
// namespace and whether that is plexus's own, resolving the path as the
// delegates will. ADD and DEL ask before they lock or record anything.
type NetNSChecker interface {
	// CheckNetNS errs when path exists but is not a network namespace.
	CheckNetNS(path string) (own bool, err error)
}

// checkNetNS asks the Router, if it can tell, whether CNI_NETNS is a
// network namespace, and plexus's own.
func (p *Pipeline) checkNetNS(req *Request) (own bool, err error) {
	c, ok := p.Routes.(NetNSChecker)
	if !ok || req.NetNS == "" {
		return false, nil
	}
	return c.CheckNetNS(req.NetNS)
}

// ownNetNS refuses a call into plexus's own network namespace unless the
// runtime sets CNI_NETNS_OVERRIDE. skel makes the same check for every
// plugin, but after the plugin has run: this one comes before anything.
func ownNetNS(req *Request) error {
	return types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("CNI_NETNS %s is plexus's own network namespace; the pod's should not be the same", req.NetNS), "")
}

// Request is one CNI call's runtime parameters.
type Request struct {
	ContainerID string
	NetNS       string
	// NetNSOverride is CNI_NETNS_OVERRIDE: NetNS may be plexus's own.
	NetNSOverride bool
	IfName        string
	// Args is CNI_ARGS, passed on to every delegate.
	Args [][2]string
	// RuntimeConfig is what the runtime sent for plexus's capabilities; it
	// reaches the default network's delegates.
	RuntimeConfig map[string]any
	CNIVersion    string // the runtime's: the result is converted to it
}

// CNI_ARGS keys kubelet sets.
const (
	ArgPodNamespace = "K8S_POD_NAMESPACE"
	ArgPodName      = "K8S_POD_NAME"
	ArgPodUID       = "K8S_POD_UID"
)

// Arg returns the CNI_ARGS value for key.
func (r *Request) Arg(key string) string {
	for _, kv := range r.Args {
		if kv[0] == key {
			return kv[1]
		}
	}
	return ""
}

// podRef is "namespace/name" from CNI_ARGS, or "" without pod arguments.
func (r *Request) podRef() string {
	if r.Arg(ArgPodName) == "" {
		return ""
	}
	return r.Arg(ArgPodNamespace) + "/" + r.Arg(ArgPodName)
}

func (p *Pipeline) runtimeConf(req *Request, a *record.Attachment) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID:    req.ContainerID,
		NetNS:          req.NetNS,
		IfName:         a.IfName,
		Args:           a.CNIArgs,
		CapabilityArgs: a.CapabilityArgs,
	}
}

// event tells the pod's owner, when the source can.
func (p *Pipeline) event(ctx context.Context, pod *source.Pod, typ source.EventType, reason, msg string) {
	if pod == nil {
		return
	}
	if rec, ok := p.Source.(source.EventRecorder); ok {
		rec.Event(ctx, pod, typ, reason, msg)
	}
}

// eventAsync records an event in the background; wait waits for it.
func (p *Pipeline) eventAsync(ctx context.Context, pod *source.Pod, typ source.EventType, reason, msg string) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.event(ctx, pod, typ, reason, msg)
	}()
	return func() { <-done }
}

// delegateCall runs one delegate operation bounded by delegateTimeout, and
// says so when that stopped it: libcni only reports the exit status.
func (p *Pipeline) delegateCall(ctx context.Context, call func(context.Context) error) error {
	d := time.Duration(p.Config.DelegateTimeout)
	if d <= 0 {
		return call(ctx)
	}
	dctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := call(dctx)
	if err != nil && dctx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("the delegate did not finish within delegateTimeout %s and was killed: %w", d, err)
	}
	return err
}

// newError builds the CNI error the runtime sees. The message names the pod
// and the network when known, then the reason.
func newError(code uint, pod, network string, err error) *types.Error {
	msg := ""
	if pod != "" {
		msg = "pod " + pod + ": "
	}
	if network != "" {
		msg += "network " + network + ": "
	}
	return &types.Error{Code: code, Msg: msg + err.Error()}
}

// asCNIError keeps an error that is already a CNI error and wraps others.
func asCNIError(code uint, pod, network string, err error) *types.Error {
	var te *types.Error
	if errors.As(err, &te) {
		return te
	}
	return newError(code, pod, network, err)
}
