// Command pause is the process of a pod sandbox's infrastructure container:
// it holds the sandbox's namespaces open, doing nothing, until the runtime
// stops it with SIGTERM or SIGINT, and then exits 0. As PID 1 of a pod that
// shares its PID namespace it is also the parent of every orphaned process,
// so it reaps them (SIGCHLD) lest they stay zombies.
//
// Standard library only and built static (CGO_ENABLED=0), so the image holds
// this one file.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], func() {}))
}

// run pauses until a stop signal and returns the exit code; ready is called
// once the signals are caught (tests wait for it before signalling).
func run(args []string, ready func()) int {
	if len(args) > 0 {
		fmt.Fprintln(os.Stderr, "usage: pause (takes no arguments; stops on SIGTERM or SIGINT)")
		return 2
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	ready()
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return 0
		}
		reap()
	}
	return 0
}

// reap collects every child that has exited. Signals coalesce, so one
// SIGCHLD may stand for several children: wait until none is left.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
