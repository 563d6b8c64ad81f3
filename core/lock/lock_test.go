package lock

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestS7_3SameContainerIsSerialized(t *testing.T) {
	l := &Locker{Dir: t.TempDir()}
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			unlock, err := l.Lock(context.Background(), "c1")
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for {
				m := maxInside.Load()
				if n <= m || maxInside.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			unlock(i%2 == 0) // removing the file must not break exclusion
		}(i)
	}
	wg.Wait()
	if maxInside.Load() != 1 {
		t.Fatalf("%d holders at once", maxInside.Load())
	}
}

func TestDifferentContainersDoNotWait(t *testing.T) {
	l := &Locker{Dir: t.TempDir()}
	u1, err := l.Lock(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer u1(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // an already-cancelled context: only an immediately free lock succeeds
	u2, err := l.Lock(ctx, "c2")
	if err != nil {
		t.Fatalf("a different container had to wait: %v", err)
	}
	u2(true)
	if _, err := l.Lock(ctx, "c1"); err == nil {
		t.Fatal("a held lock was granted twice")
	}
}

func TestUnlockRemoveLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	l := &Locker{Dir: dir}
	u, err := l.Lock(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	u(true)
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	if _, err := l.Lock(context.Background(), "../x"); err == nil {
		t.Fatal("a path was accepted as container ID")
	}
}

// TestSymlinkedLockFileIsNotFollowed: a symlink in the lock directory in
// place of a container's lock file is refused; its target is neither
// created nor locked.
func TestSymlinkedLockFileIsNotFollowed(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.Symlink(target, filepath.Join(dir, "c1.lock")); err != nil {
		t.Fatal(err)
	}
	l := &Locker{Dir: dir}
	_, err := l.Lock(context.Background(), "c1")
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("err = %v, want a refusal naming the symbolic link", err)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Errorf("the link's target was created: %v", err)
	}
}
