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

// delegateRejection is the delegate's error answer as "code: message", or
// "" for other failures (timeout, kill, exec) and "try again later" (code
// 11), after which it may have done part of its work.
func delegateRejection(err error) string {
	var te *types.Error
	if !errors.As(err, &te) || te.Code == types.ErrTryAgainLater || te.Code == 0 {
		return ""
	}
	return fmt.Sprintf("%d: %s", te.Code, te.Msg)
}

// rejectedAgain: a DEL answered with the rejection of the attachment's ADD.
func rejectedAgain(a *record.Attachment, err error) bool {
	return a.State == record.Attempted && a.Rejected != "" && delegateRejection(err) == a.Rejected
}

// detachRejected undoes an attachment whose delegate rejects its config at
// ADD and DEL alike (an unknown cniVersion, an invalid subnet), which would
// fail every DEL. A plugin checks its config before it acts, so each is
// asked on its own, in reverse order, and only those answering with the
// same rejection are passed over.
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
