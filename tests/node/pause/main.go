// Command pause is the tests' sandbox (and container) image: it holds the
// pod's namespaces and does nothing until it is told to stop, as
// registry.k8s.io/pause does. The node tests have no registry, so they pack
// it as an image themselves.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	// As PID 1 of a pod sharing its process namespace it would inherit
	// orphans; Go's runtime does not reap them, and the tests' pods share
	// nothing, so waiting for the signal is all there is to do.
	<-stop
}
