package follow

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// NewRecorder is client-go's event recorder for a node's agent: Events
// name the component and the node as their source (admission binds the
// source to the credential's node), and the recorder aggregates repeats
// and rate-limits each object's Events. stop flushes nothing and ends the
// recorder's goroutine.
func NewRecorder(core kubernetes.Interface, component, node string) (r record.EventRecorder, stop func()) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: core.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component, Host: node}), b.Shutdown
}
