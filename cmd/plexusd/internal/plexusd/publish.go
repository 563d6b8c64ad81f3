package plexusd

import (
	"context"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/plexus-cni/plexus/cmd/internal/daemon"
	"github.com/plexus-cni/plexus/core/source"
)

// publisher sends network-status (s5) and events after the ADD has
// answered, so a sandbox does not wait for those round trips. Per pod,
// work runs in order, one at a time, and a waiting status is replaced by a
// newer one. A failed status is retried with backoff until it is sent, the
// pod is gone or re-created (the patch names the UID), the container is
// DELed (which cancels what it still had to send), or plexusd stops.
type publisher struct {
	src                source.Source
	log                *slog.Logger
	retryMin, retryMax time.Duration // between attempts at one status

	ctx    context.Context // plexusd's lifetime; cancelled after draining
	cancel context.CancelFunc
	mu     sync.Mutex
	pods   map[string]*podWork // by namespace/name, while there is work
	wg     sync.WaitGroup      // one per running pod worker
}

// podWork is one pod's queue and what is running from it.
type podWork struct {
	queue   []*publishJob
	running *publishJob
}

// publishJob is one status or one event to send.
type publishJob struct {
	container string // CNI_CONTAINERID of the call that made it
	pod       *source.Pod
	doc       []byte // the status document; nil for an event
	event     func(context.Context)
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{} // closed when it finished or was dropped
}

func newPublisher(src source.Source, log *slog.Logger) *publisher {
	ctx, cancel := context.WithCancel(context.Background())
	return &publisher{src: src, log: log, retryMin: 500 * time.Millisecond, retryMax: 30 * time.Second,
		ctx: ctx, cancel: cancel, pods: map[string]*podWork{}}
}

// containerKey carries the call's container into the source calls.
type containerKey struct{}

// withContainer marks ctx with the call's container, for its DEL to cancel.
func withContainer(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, containerKey{}, id)
}

func containerOf(ctx context.Context) string {
	id, _ := ctx.Value(containerKey{}).(string)
	return id
}

// queue adds a status (doc), replacing one not started, or an event (send).
func (p *publisher) queue(ctx context.Context, pod *source.Pod, doc []byte, send func(context.Context)) {
	jctx, cancel := context.WithCancel(p.ctx)
	j := &publishJob{container: containerOf(ctx), pod: pod, doc: doc, event: send, ctx: jctx, cancel: cancel, done: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.work(pod.Ref())
	for i, q := range w.queue {
		if doc != nil && q.doc != nil {
			q.cancel()
			close(q.done)
			w.queue[i] = j
			return
		}
	}
	w.queue = append(w.queue, j)
}

// work returns the pod's queue, starting its worker; mu is held.
func (p *publisher) work(ref string) *podWork {
	w := p.pods[ref]
	if w == nil {
		w = &podWork{}
		p.pods[ref] = w
		p.wg.Go(func() { p.run(ref, w) })
	}
	return w
}

// pending reports whether the pod ("namespace/name") has work.
func (p *publisher) pending(ref string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pods[ref] != nil
}

// run sends the pod's work in order and ends when its queue is empty.
func (p *publisher) run(ref string, w *podWork) {
	for {
		p.mu.Lock()
		if len(w.queue) == 0 {
			delete(p.pods, ref)
			p.mu.Unlock()
			return
		}
		j := w.queue[0]
		w.queue = w.queue[1:]
		w.running = j
		p.mu.Unlock()

		p.send(j)

		p.mu.Lock()
		w.running = nil
		j.cancel()
		close(j.done)
		p.mu.Unlock()
	}
}

func (p *publisher) send(j *publishJob) {
	if j.event != nil {
		j.event(j.ctx)
		return
	}
	wait := p.retryMin
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := p.src.PublishStatus(j.ctx, j.pod, j.doc)
		switch {
		case err == nil:
			p.log.Debug("network-status published", "pod", j.pod.Ref(), "container", j.container, "attempt", attempt, "took", time.Since(start))
			return
		case j.ctx.Err() != nil:
			p.log.Info("network-status not published: the container was deleted or plexusd is stopping", "pod", j.pod.Ref(), "container", j.container)
			return
		case gone(err):
			p.log.Warn("network-status not published: the pod is gone or was re-created", "pod", j.pod.Ref(), "container", j.container, "err", err)
			return
		}
		p.log.Error("publishing network-status failed; retrying", "pod", j.pod.Ref(), "container", j.container, "attempt", attempt, "in", wait, "err", err)
		select {
		case <-j.ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, p.retryMax)
	}
}

// gone: the pod no longer exists, or has another UID (the patch is Invalid).
func gone(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsGone(err) || apierrors.IsInvalid(err)
}

// forget cancels the network-status container has queued or running, and
// returns once none of it runs: after a DEL it would describe interfaces
// that are gone. Its events stay queued: what they say stays true.
func (p *publisher) forget(container string) {
	if container == "" {
		return
	}
	var running []*publishJob
	p.mu.Lock()
	for _, w := range p.pods {
		kept := w.queue[:0]
		for _, j := range w.queue {
			if j.container == container && j.doc != nil {
				j.cancel()
				close(j.done)
				continue
			}
			kept = append(kept, j)
		}
		w.queue = kept
		if j := w.running; j != nil && j.container == container && j.doc != nil {
			j.cancel()
			running = append(running, j)
		}
	}
	p.mu.Unlock()
	for _, j := range running {
		<-j.done
	}
}

// handler marks calls with their container; a DEL first cancels its work.
func (p *publisher) handler(next daemon.Handler) daemon.Handler {
	if p == nil {
		return next
	}
	return func(ctx context.Context, c *daemon.Call) *daemon.Reply {
		id := c.CmdArgs().ContainerID
		if c.Command() == "DEL" {
			p.forget(id)
		}
		return next(withContainer(ctx, id), c)
	}
}

// publishGrace is how long a stopping plexusd keeps sending what it queued.
const publishGrace = 10 * time.Second

// close waits up to grace for the queued work, then cancels the rest.
func (p *publisher) close(grace time.Duration) {
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		p.mu.Lock()
		n := 0
		for _, w := range p.pods {
			n += len(w.queue)
			if w.running != nil {
				n++
			}
		}
		p.mu.Unlock()
		p.log.Warn("plexusd stopping with network-status or events not yet sent", "pending", n)
		p.cancel()
		<-done
	}
	p.cancel()
}

// asyncSource is plexusd's counted source, publishing through publisher.
type asyncSource struct {
	countingSource
	pub *publisher
}

// PublishStatus queues the status; the ADD does not wait for it.
func (s asyncSource) PublishStatus(ctx context.Context, pod *source.Pod, doc []byte) error {
	s.pub.queue(ctx, pod, doc, nil)
	return nil
}

// Event queues the event behind the pod's status.
func (s asyncSource) Event(ctx context.Context, pod *source.Pod, typ source.EventType, reason, msg string) {
	s.pub.queue(ctx, pod, nil, func(ctx context.Context) { s.countingSource.Event(ctx, pod, typ, reason, msg) })
}
