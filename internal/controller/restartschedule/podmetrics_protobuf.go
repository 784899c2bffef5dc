package restartschedule

// The protobuf PodMetricsList walked field by field from the connection:
// only each item's name, timestamp and memory quantities are kept.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// protobufEnvelope begins a Kubernetes protobuf answer, whose message is a
// runtime.Unknown wrapping the object's own encoding.
var protobufEnvelope = []byte{'k', '8', 's', 0}

// Field numbers of the messages walked (k8s.io/apimachinery runtime,
// meta/v1 and resource generated.proto, k8s.io/metrics v1beta1
// generated.proto).
const (
	unknownRawField        = 2 // runtime.Unknown.raw
	listItemsField         = 2 // PodMetricsList.items
	podMetadataField       = 1 // PodMetrics.metadata
	podTimestampField      = 2 // PodMetrics.timestamp
	podContainersField     = 4 // PodMetrics.containers
	objectMetaNameField    = 1 // ObjectMeta.name
	timeSecondsField       = 1 // Time.seconds
	containerNameField     = 1 // ContainerMetrics.name
	containerUsageField    = 2 // ContainerMetrics.usage, map entries
	mapEntryKeyField       = 1
	mapEntryValueField     = 2
	quantityStringField    = 1 // Quantity.string
	memoryResourceName     = string(corev1.ResourceMemory)
	internedContainerNames = 64
)

// maxPodMetricsBytes bounds one PodMetrics of an answer: its pod's labels
// and a quantity per resource of each container come to a few hundred
// bytes; a larger item is an answer this reader does not trust.
const maxPodMetricsBytes = 1 << 20

// protobufWorkingSets walks the list's protobuf encoding and keeps only
// what the triggers read: each item's name, timestamp and memory
// quantities. Decoding each item into a PodMetrics instead (its labels,
// a map of quantities per container) allocated several times what is
// kept. Container names, the same few in every pod, are shared.
func protobufWorkingSets(s *protoStream) (map[string]PodUsage, error) {
	out := map[string]PodUsage{}
	// The runtime.Unknown around the list: the list is its raw field. The
	// fields after it are read too: an answer cut short is an error, not
	// the pods read so far.
	for {
		n, ok, err := s.nextLengthDelimited(unknownRawField)
		if err != nil || !ok {
			return out, err
		}
		if n > math.MaxInt64 {
			return nil, fmt.Errorf("protobuf field of %d bytes", n)
		}
		list := &protoStream{r: s.r, left: int64(n)}
		names := map[string]string{}
		var item []byte
		for {
			n, ok, err := list.nextLengthDelimited(listItemsField)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			if item, err = list.read(item[:0], n, maxPodMetricsBytes); err != nil {
				return nil, err
			}
			name, u, err := protobufPodUsage(item, names)
			if err != nil {
				return nil, err
			}
			out[name] = u
		}
	}
}

// protoStream reads the fields of a protobuf message from a stream: left
// bytes of it (a length-delimited field's), or all that follows when left
// is negative.
type protoStream struct {
	r    *bufio.Reader
	left int64
}

// more reports whether a field follows.
func (s *protoStream) more() bool {
	if s.left >= 0 {
		return s.left > 0
	}
	_, err := s.r.Peek(1)
	return err == nil
}

// ReadByte reads a byte of the message (an io.ByteReader, for
// binary.ReadUvarint).
func (s *protoStream) ReadByte() (byte, error) {
	if s.left == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	b, err := s.r.ReadByte()
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if s.left > 0 {
		s.left--
	}
	return b, err
}

func (s *protoStream) uvarint() (uint64, error) { return binary.ReadUvarint(s) }

func (s *protoStream) tag() (protowire.Number, protowire.Type, error) {
	v, err := s.uvarint()
	num, typ := protowire.DecodeTag(v)
	if err == nil && num < protowire.MinValidNumber {
		err = fmt.Errorf("protobuf field number %d", num)
	}
	return num, typ, err
}

// discard skips n bytes.
func (s *protoStream) discard(n uint64) error {
	if s.left >= 0 && n > uint64(s.left) {
		return io.ErrUnexpectedEOF
	}
	got, err := s.r.Discard(int(min(n, math.MaxInt32)))
	if s.left > 0 {
		s.left -= int64(got)
	}
	if err == io.EOF || (err == nil && uint64(got) < n) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// nextLengthDelimited skips to the next length-delimited field number num
// and returns its length; ok is false at the end of the message.
func (s *protoStream) nextLengthDelimited(num protowire.Number) (n uint64, ok bool, err error) {
	for s.more() {
		got, typ, err := s.tag()
		if err != nil {
			return 0, false, err
		}
		if got == num && typ == protowire.BytesType {
			n, err := s.uvarint()
			return n, err == nil, err
		}
		if err := s.skip(typ); err != nil {
			return 0, false, err
		}
	}
	return 0, false, nil
}

// read reads the n bytes of a field into buf, refusing more than limit.
func (s *protoStream) read(buf []byte, n, limit uint64) ([]byte, error) {
	if n > limit || (s.left >= 0 && n > uint64(s.left)) {
		return nil, fmt.Errorf("protobuf field of %d bytes", n)
	}
	buf = slices.Grow(buf, int(n))[:n]
	if _, err := io.ReadFull(s.r, buf); err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	if s.left > 0 {
		s.left -= int64(n)
	}
	return buf, nil
}

// skip skips the value of a field of wire type typ.
func (s *protoStream) skip(typ protowire.Type) error {
	switch typ {
	case protowire.VarintType:
		_, err := s.uvarint()
		return err
	case protowire.Fixed32Type:
		return s.discard(4)
	case protowire.Fixed64Type:
		return s.discard(8)
	case protowire.BytesType:
		n, err := s.uvarint()
		if err != nil {
			return err
		}
		return s.discard(n)
	}
	return fmt.Errorf("protobuf wire type %d not read", typ)
}

// protobufPodUsage reads one PodMetrics message.
func protobufPodUsage(msg []byte, names map[string]string) (string, PodUsage, error) {
	var name string
	var u PodUsage
	err := eachField(msg, func(num protowire.Number, b []byte, _ uint64) error {
		switch num {
		case podMetadataField:
			n, err := lastBytes(b, objectMetaNameField)
			name = string(n)
			return err
		case podTimestampField:
			// As metav1.Time decodes it: whole seconds, what JSON carries.
			var secs int64
			err := eachField(b, func(num protowire.Number, _ []byte, v uint64) error {
				if num == timeSecondsField {
					secs = int64(v)
				}
				return nil
			})
			u.At = time.Unix(secs, 0)
			return err
		case podContainersField:
			c, ok, err := protobufContainerUsage(b, names)
			if ok {
				u.Containers = append(u.Containers, c)
			}
			return err
		}
		return nil
	})
	return name, u, err
}

// protobufContainerUsage reads one ContainerMetrics message; ok is false
// when it has no memory quantity.
func protobufContainerUsage(msg []byte, names map[string]string) (c ContainerUsage, ok bool, err error) {
	err = eachField(msg, func(num protowire.Number, b []byte, _ uint64) error {
		switch num {
		case containerNameField:
			c.Name = intern(names, b)
		case containerUsageField:
			key, err := lastBytes(b, mapEntryKeyField)
			if err != nil || string(key) != memoryResourceName {
				return err
			}
			value, err := lastBytes(b, mapEntryValueField)
			if err != nil {
				return err
			}
			text, err := lastBytes(value, quantityStringField)
			if err != nil {
				return err
			}
			q, err := resource.ParseQuantity(string(text))
			if err != nil {
				return fmt.Errorf("container memory usage: %w", err)
			}
			c.WorkingSet, ok = q.Value(), true
		}
		return nil
	})
	return c, ok, err
}

// intern returns b as a string, the same string for the same bytes while
// names holds fewer than internedContainerNames (a tenant naming every
// container differently only costs the allocations interning saves).
func intern(names map[string]string, b []byte) string {
	if s, ok := names[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(names) < internedContainerNames {
		names[s] = s
	}
	return s
}

// lastBytes is the last length-delimited field number num of msg (as a
// protobuf decoder keeps the last of a field that is not repeated), nil
// when there is none.
func lastBytes(msg []byte, num protowire.Number) (last []byte, err error) {
	err = eachField(msg, func(n protowire.Number, b []byte, _ uint64) error {
		if n == num {
			last = b
		}
		return nil
	})
	return last, err
}

// eachField calls fn with each field of the protobuf message msg: its
// number, and its bytes (length-delimited) or value (varint); fields of
// other wire types are skipped.
func eachField(msg []byte, fn func(num protowire.Number, b []byte, v uint64) error) error {
	for len(msg) > 0 {
		num, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return protowire.ParseError(l)
		}
		msg = msg[l:]
		var b []byte
		var v uint64
		switch typ {
		case protowire.BytesType:
			b, l = protowire.ConsumeBytes(msg)
		case protowire.VarintType:
			v, l = protowire.ConsumeVarint(msg)
		default:
			l = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if l < 0 {
			return protowire.ParseError(l)
		}
		msg = msg[l:]
		if typ != protowire.BytesType && typ != protowire.VarintType {
			continue
		}
		if err := fn(num, b, v); err != nil {
			return err
		}
	}
	return nil
}
