package podresources

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/plexus-cni/plexus/core/pipeline"
)

// Field numbers of the messages plexus reads (api.proto, podresources v1).
const (
	getRequestPodName      = 1 // GetPodResourcesRequest.pod_name
	getRequestPodNamespace = 2 // GetPodResourcesRequest.pod_namespace
	responsePodResources   = 1 // Get...Response and List...Response .pod_resources
	podName                = 1 // PodResources.name
	podNamespace           = 2 // PodResources.namespace
	podContainers          = 3 // PodResources.containers
	containerDevices       = 2 // ContainerResources.devices
	devicesResourceName    = 1 // ContainerDevices.resource_name
	devicesDeviceIDs       = 2 // ContainerDevices.device_ids
)

// podResources is the part of a PodResources message plexus uses.
type podResources struct {
	namespace, name string
	devices         pipeline.PodDevices
}

func encodeGetRequest(name, namespace string) []byte {
	var b []byte
	b = protowire.AppendTag(b, getRequestPodName, protowire.BytesType)
	b = protowire.AppendString(b, name)
	b = protowire.AppendTag(b, getRequestPodNamespace, protowire.BytesType)
	return protowire.AppendString(b, namespace)
}

func decodeGetResponse(b []byte) (*podResources, error) {
	var out *podResources
	err := fields(b, func(num protowire.Number, v []byte) error {
		if num != responsePodResources {
			return nil
		}
		pr, err := decodePod(v)
		out = pr
		return err
	})
	return out, err
}

func decodeListResponse(b []byte, namespace, name string) (*podResources, error) {
	var out *podResources
	err := fields(b, func(num protowire.Number, v []byte) error {
		if num != responsePodResources || out != nil {
			return nil
		}
		pr, err := decodePod(v)
		if err == nil && pr.namespace == namespace && pr.name == name {
			out = pr
		}
		return err
	})
	return out, err
}

func decodePod(b []byte) (*podResources, error) {
	pr := &podResources{devices: pipeline.PodDevices{}}
	err := fields(b, func(num protowire.Number, v []byte) error {
		switch num {
		case podName:
			pr.name = string(v)
		case podNamespace:
			pr.namespace = string(v)
		case podContainers:
			return fields(v, func(num protowire.Number, v []byte) error {
				if num == containerDevices {
					return decodeDevices(v, pr.devices)
				}
				return nil
			})
		}
		return nil
	})
	return pr, err
}

func decodeDevices(b []byte, into pipeline.PodDevices) error {
	var res string
	var ids []string
	err := fields(b, func(num protowire.Number, v []byte) error {
		switch num {
		case devicesResourceName:
			res = string(v)
		case devicesDeviceIDs:
			ids = append(ids, string(v))
		}
		return nil
	})
	into[res] = append(into[res], ids...)
	return err
}

// fields calls f for every length-delimited field of a message (all the
// fields plexus reads are strings or messages) and skips the others.
func fields(b []byte, f func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("malformed message: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("malformed field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("malformed field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, v); err != nil {
			return err
		}
	}
	return nil
}
