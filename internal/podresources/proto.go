package podresources

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/plexus-cni/plexus/core/pipeline"
)

// The API's messages (k8s.io/kubelet/pkg/apis/podresources/v1/api.proto)
// by field number, only the fields plexus sends or reads; the rest are
// skipped by wire type. Protobuf's varints are encoding/binary's.
const (
	// GetPodResourcesRequest.
	fieldRequestPodName      = 1
	fieldRequestPodNamespace = 2
	// GetPodResourcesResponse (one) and ListPodResourcesResponse (repeated).
	fieldResponsePodResources = 1
	// PodResources.
	fieldPodName       = 1
	fieldPodNamespace  = 2
	fieldPodContainers = 3
	// ContainerResources.
	fieldContainerDevices = 2
	// ContainerDevices.
	fieldDevicesResourceName = 1
	fieldDevicesIDs          = 2
)

// Protobuf wire types. kubelet sends no groups (3, 4: deprecated), but
// they are skipped as a decoder must.
const (
	wireVarint     = 0
	wireFixed64    = 1
	wireBytes      = 2
	wireStartGroup = 3
	wireEndGroup   = 4
	wireFixed32    = 5
)

// podResources is what plexus reads of a PodResources message.
type podResources struct {
	namespace, name string
	devices         pipeline.PodDevices
}

// getRequest encodes GetPodResourcesRequest.
func getRequest(namespace, name string) []byte {
	return appendString(appendString(nil, fieldRequestPodName, name), fieldRequestPodNamespace, namespace)
}

// appendString appends a string field; proto3 leaves out empty ones.
func appendString(b []byte, field uint64, s string) []byte {
	if s == "" {
		return b
	}
	b = binary.AppendUvarint(b, field<<3|wireBytes)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decodePods reads the PodResources of a Get or List response.
func decodePods(msg []byte) ([]podResources, error) {
	var pods []podResources
	err := eachBytesField(msg, func(field uint64, v []byte) error {
		if field != fieldResponsePodResources {
			return nil
		}
		p, err := decodePod(v)
		pods = append(pods, p)
		return err
	})
	return pods, err
}

func decodePod(msg []byte) (podResources, error) {
	p := podResources{devices: pipeline.PodDevices{}}
	err := eachBytesField(msg, func(field uint64, v []byte) error {
		switch field {
		case fieldPodName:
			p.name = string(v)
		case fieldPodNamespace:
			p.namespace = string(v)
		case fieldPodContainers:
			return eachBytesField(v, func(field uint64, v []byte) error {
				if field != fieldContainerDevices {
					return nil
				}
				return decodeDevices(v, p.devices)
			})
		}
		return nil
	})
	return p, err
}

// decodeDevices adds a ContainerDevices' device IDs to its resource's.
func decodeDevices(msg []byte, into pipeline.PodDevices) error {
	var resource string
	var ids []string
	err := eachBytesField(msg, func(field uint64, v []byte) error {
		switch field {
		case fieldDevicesResourceName:
			resource = string(v)
		case fieldDevicesIDs:
			ids = append(ids, string(v))
		}
		return nil
	})
	into[resource] = append(into[resource], ids...)
	return err
}

var errTruncated = errors.New("truncated protobuf message")

// maxGroupDepth bounds nested groups, so hostile input cannot recurse
// without end.
const maxGroupDepth = 64

// eachBytesField calls fn with every length-delimited field of msg, in
// order (strings, messages and packed repeated numbers), and skips the
// others.
func eachBytesField(msg []byte, fn func(field uint64, v []byte) error) error {
	for len(msg) > 0 {
		field, wire, n, err := readTag(msg)
		if err != nil {
			return err
		}
		msg = msg[n:]
		if wire == wireBytes {
			v, n, err := readBytes(msg)
			if err != nil {
				return err
			}
			if err := fn(field, v); err != nil {
				return err
			}
			msg = msg[n:]
			continue
		}
		n, err = skip(msg, field, wire, 0)
		if err != nil {
			return err
		}
		msg = msg[n:]
	}
	return nil
}

func readTag(msg []byte) (field, wire uint64, n int, err error) {
	tag, n := binary.Uvarint(msg)
	if n <= 0 {
		return 0, 0, 0, errTruncated
	}
	if tag>>3 == 0 {
		return 0, 0, 0, errors.New("protobuf field number 0")
	}
	return tag >> 3, tag & 7, n, nil
}

// readBytes reads a length-delimited value: it and the bytes it took.
func readBytes(msg []byte) ([]byte, int, error) {
	size, n := binary.Uvarint(msg)
	if n <= 0 || size > uint64(len(msg)-n) {
		return nil, 0, errTruncated
	}
	return msg[n : n+int(size)], n + int(size), nil
}

// skip returns how many bytes of msg the value of a field of this wire
// type takes (a group: up to and with its end).
func skip(msg []byte, field, wire uint64, depth int) (int, error) {
	var n int
	switch wire {
	case wireVarint:
		if _, n = binary.Uvarint(msg); n <= 0 {
			return 0, errTruncated
		}
	case wireFixed64:
		n = 8
	case wireFixed32:
		n = 4
	case wireBytes:
		_, size, err := readBytes(msg)
		return size, err
	case wireStartGroup:
		return skipGroup(msg, field, depth+1)
	default:
		return 0, fmt.Errorf("protobuf wire type %d where field %d's value should be", wire, field)
	}
	if n > len(msg) {
		return 0, errTruncated
	}
	return n, nil
}

func skipGroup(msg []byte, group uint64, depth int) (int, error) {
	if depth > maxGroupDepth {
		return 0, errors.New("protobuf groups nested too deep")
	}
	off := 0
	for {
		field, wire, n, err := readTag(msg[off:])
		if err != nil {
			return 0, err
		}
		off += n
		if wire == wireEndGroup {
			if field != group {
				return 0, fmt.Errorf("protobuf group %d ended as %d", group, field)
			}
			return off, nil
		}
		n, err = skip(msg[off:], field, wire, depth)
		if err != nil {
			return 0, err
		}
		off += n
	}
}
