package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/netconf"
	"github.com/plexus-cni/plexus/core/record"
)

// delegateRejection is the error a delegate answered with, as
// "code: message", or "" when the failure was not the delegate's own
// answer: a timeout, a kill, an exec failure, or "try again later" (code
// 11), after which the delegate may have done part of its work.
func delegateRejection(err error) string {
	var te *types.Error
	if !errors.As(err, &te) || te.Code == types.ErrTryAgainLater || te.Code == 0 {
		return ""
	}
	return fmt.Sprintf("%d: %s", te.Code, te.Msg)
}

// rejectedAgain reports a DEL of an attachment whose ADD a delegate
// rejected, answered with that same rejection.
func rejectedAgain(a *record.Attachment, err error) bool {
	return a.State == record.Attempted && a.Rejected != "" && delegateRejection(err) == a.Rejected
}

// detachRejected undoes an attachment whose delegate rejects its config at
// ADD and at DEL alike (a cniVersion it does not know, an invalid subnet):
// a plugin checks its config before it acts, so the one that rejects it
// created nothing. Each plugin of the list is asked on its own, in reverse
// order, so that the plugins before it, which may have acted, are still
// undone; only plugins answering with the same rejection are passed over.
// Without this, every DEL of the container would fail the same way.
func (p *Pipeline) detachRejected(ctx context.Context, req *Request, a *record.Attachment) error {
	list, err := netconf.ConfList(a.Config)
	if err != nil {
		return err
	}
	var msgs []string
	for i := len(list.Plugins) - 1; i >= 0; i-- {
		one := &libcni.NetworkConfigList{Name: list.Name, CNIVersion: list.CNIVersion, Plugins: list.Plugins[i : i+1]}
		err := p.delegateCall(ctx, func(ctx context.Context) error {
			return p.CNI.DelNetworkList(ctx, one, p.runtimeConf(req, a))
		})
		switch {
		case err == nil:
		case delegateRejection(err) == a.Rejected:
			p.Log.Info("delegate rejects its config at DEL as at ADD: nothing to undo", "network", a.Name, "interface", a.IfName, "plugin", i, "error", a.Rejected)
		default:
			msgs = append(msgs, fmt.Sprintf("plugin %d: %v", i, err))
		}
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}
