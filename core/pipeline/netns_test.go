package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// netnsRouter is a Router that also says what CNI_NETNS is.
type netnsRouter struct {
	fakeRouter
	own bool
	err error
}

func (r *netnsRouter) CheckNetNS(string) (bool, error) { return r.own, r.err }

// TestAddAndDelRefusePlexussOwnNetworkNamespace: an ADD or a DEL into
// plexus's own network namespace is refused before anything is locked,
// recorded or run, as skel refuses it for every plugin, unless the runtime
// sets CNI_NETNS_OVERRIDE.
func TestAddAndDelRefusePlexussOwnNetworkNamespace(t *testing.T) {
	ctx := context.Background()
	t.Run("ADD", func(t *testing.T) {
		f := newFixture(t, `[{"name":"net-a"}]`)
		f.p.Routes = &netnsRouter{own: true}
		_, err := f.p.Add(ctx, f.req)
		assertOwnNetNSRefused(t, err)
		if len(f.cni.calls) != 0 {
			t.Errorf("delegates ran: %v", f.cni.calls)
		}
		for _, dir := range []string{f.p.Locks.Dir, f.p.Records.Dir} {
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s exists after a refused ADD (%v)", filepath.Base(dir), err)
			}
		}
	})
	t.Run("DEL", func(t *testing.T) {
		f := newFixture(t, `[{"name":"net-a"}]`)
		router := &netnsRouter{}
		f.p.Routes = router
		if _, err := f.p.Add(ctx, f.req); err != nil {
			t.Fatal(err)
		}
		router.own, f.cni.calls = true, nil
		assertOwnNetNSRefused(t, f.p.Del(ctx, f.req))
		if len(f.cni.calls) != 0 {
			t.Errorf("delegates ran: %v", f.cni.calls)
		}
		if rec, err := f.p.Records.Load(f.req.ContainerID); rec == nil || err != nil {
			t.Errorf("the record did not survive the refused DEL: %v, %v", rec, err)
		}
	})
	t.Run("overridden", func(t *testing.T) {
		f := newFixture(t, `[{"name":"net-a"}]`)
		f.p.Routes = &netnsRouter{own: true}
		f.req.NetNSOverride = true
		if _, err := f.p.Add(ctx, f.req); err != nil {
			t.Fatalf("ADD: %v", err)
		}
		if err := f.p.Del(ctx, f.req); err != nil {
			t.Fatalf("DEL: %v", err)
		}
		if !slices.Contains(f.cni.calls, "DEL net-a net1") {
			t.Errorf("DEL ran %v, want net-a's DEL among them", f.cni.calls)
		}
	})
}

func assertOwnNetNSRefused(t *testing.T, err error) {
	t.Helper()
	var e *types.Error
	if !errors.As(err, &e) || e.Code != types.ErrInvalidNetNS || !strings.Contains(e.Msg, "plexus's own network namespace") {
		t.Errorf("got %v, want CNI error %d naming plexus's own network namespace", err, types.ErrInvalidNetNS)
	}
}

// TestDelGoesOnWhenCNI_NETNSIsNoNamespace: CNI lets DEL run after the
// namespace is gone, so a CNI_NETNS that is no namespace does not stop it.
func TestDelGoesOnWhenCNI_NETNSIsNoNamespace(t *testing.T) {
	f := newFixture(t, `[{"name":"net-a"}]`)
	router := &netnsRouter{}
	f.p.Routes = router
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	router.err, f.cni.calls = errors.New("not a network namespace"), nil
	if err := f.p.Del(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(f.cni.calls, "DEL net-a net1") || !slices.Contains(f.cni.calls, "DEL default-net eth0") {
		t.Errorf("DEL ran %v, want both networks' DELs", f.cni.calls)
	}
}
