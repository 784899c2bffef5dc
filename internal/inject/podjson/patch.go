package podjson

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Additions are what injection adds to a pod, in patch order.
type Additions struct {
	// BeforeInit go to the head of spec.initContainers and AfterInit to its
	// tail; Before and After likewise for spec.containers.
	BeforeInit, AfterInit, Before, After []Sidecar
	// Volumes, ImagePullSecrets and ReadinessGates are appended, encoded.
	Volumes, ImagePullSecrets, ReadinessGates [][]byte
	// Annotations are set, in order.
	Annotations []Annotation
	// Labels are set, in order.
	Labels []Annotation
	// RemovedAnnotations are keys the pod has that are removed.
	RemovedAnnotations []string
}

// Annotation is one metadata.annotations (or metadata.labels) entry.
type Annotation struct{ Key, Value string }

// WritePatch returns the JSON patch ("add" operations, and "remove" ones
// for RemovedAnnotations) that makes the additions to pod, nil if there are
// none.
func WritePatch(pod *RawPod, add *Additions) ([]byte, error) {
	w := patchWriter{buf: make([]byte, 0, patchSize(pod, add))}
	apps := &appContainers{pod: pod}
	if err := w.containers("/spec/initContainers", !pod.HasInitContainers, add.BeforeInit, add.AfterInit, apps); err != nil {
		return nil, err
	}
	if err := w.containers("/spec/containers", len(pod.Containers) == 0, add.Before, add.After, apps); err != nil {
		return nil, err
	}
	w.list("/spec/volumes", !pod.HasVolumes, add.Volumes)
	w.list("/spec/imagePullSecrets", !pod.HasImagePullSecrets, add.ImagePullSecrets)
	w.list("/spec/readinessGates", !pod.HasReadinessGates, add.ReadinessGates)
	w.stringMap("/metadata/labels", !pod.HasLabels, add.Labels)
	w.stringMap("/metadata/annotations", !pod.HasAnnotations, add.Annotations)
	for _, k := range add.RemovedAnnotations {
		w.remove("/metadata/annotations/" + pointerEscaper.Replace(k))
	}
	return w.done(), nil
}

// patchSize is a capacity for the patch buffer that is rarely exceeded.
func patchSize(pod *RawPod, add *Additions) int {
	size := 512
	for _, list := range [][]Sidecar{add.BeforeInit, add.AfterInit, add.Before, add.After} {
		for _, sc := range list {
			size += sc.size(pod)
		}
	}
	for _, v := range add.Volumes {
		size += len(v) + 48
	}
	for _, a := range add.Annotations {
		size += len(a.Key) + len(a.Value) + 48
	}
	for _, a := range add.Labels {
		size += len(a.Key) + len(a.Value) + 48
	}
	return size + size/4 + 1024
}

// patchWriter writes a JSON patch of "add" operations.
type patchWriter struct {
	buf []byte
	n   int
}

// op opens an operation of kind op at path, after a separator.
func (w *patchWriter) op(op, path string) {
	if w.n == 0 {
		w.buf = append(w.buf, '[')
	} else {
		w.buf = append(w.buf, ',')
	}
	w.n++
	w.buf = append(w.buf, `{"op":"`...)
	w.buf = append(w.buf, op...)
	w.buf = append(w.buf, `","path":`...)
	w.buf = appendString(w.buf, path)
}

// begin opens an "add" operation at path; the caller writes the value and '}'.
func (w *patchWriter) begin(path string) {
	w.op("add", path)
	w.buf = append(w.buf, `,"value":`...)
}

// remove writes a "remove" operation at path.
func (w *patchWriter) remove(path string) {
	w.op("remove", path)
	w.buf = append(w.buf, '}')
}

func (w *patchWriter) rawOp(path string, value []byte) {
	w.begin(path)
	w.buf = append(w.buf, value...)
	w.buf = append(w.buf, '}')
}

// containers puts before at the head of the list at path and after at its
// tail, or creates the list when the pod has none.
func (w *patchWriter) containers(path string, absent bool, before, after []Sidecar, apps *appContainers) error {
	if len(before)+len(after) == 0 {
		return nil
	}
	var err error
	if absent {
		all := append(before, after...)
		w.create(path, '[', ']', len(all), func(i int) {
			if err == nil {
				w.buf, err = apps.appendContainer(w.buf, all[i])
			}
		})
		return err
	}
	for i, sc := range before {
		w.begin(path + "/" + strconv.Itoa(i))
		if w.buf, err = apps.appendContainer(w.buf, sc); err != nil {
			return err
		}
		w.buf = append(w.buf, '}')
	}
	for _, sc := range after {
		w.begin(path + "/-")
		if w.buf, err = apps.appendContainer(w.buf, sc); err != nil {
			return err
		}
		w.buf = append(w.buf, '}')
	}
	return nil
}

// list appends items to the list at path, or creates it when absent.
func (w *patchWriter) list(path string, absent bool, items [][]byte) {
	if len(items) == 0 {
		return
	}
	if absent {
		w.create(path, '[', ']', len(items), func(i int) { w.buf = append(w.buf, items[i]...) })
		return
	}
	for _, it := range items {
		w.rawOp(path+"/-", it)
	}
}

// stringMap sets each entry of the map at path (metadata.annotations or
// metadata.labels), creating the map when absent.
func (w *patchWriter) stringMap(path string, absent bool, as []Annotation) {
	if len(as) == 0 {
		return
	}
	if absent {
		w.create(path, '{', '}', len(as), func(i int) {
			w.buf = appendString(w.buf, as[i].Key)
			w.buf = append(w.buf, ':')
			w.buf = appendString(w.buf, as[i].Value)
		})
		return
	}
	for _, a := range as {
		w.begin(path + "/" + pointerEscaper.Replace(a.Key))
		w.buf = appendString(w.buf, a.Value)
		w.buf = append(w.buf, '}')
	}
}

// create writes the add operation that creates the list or object at path,
// between the brackets open and close, from n items: item(i) writes the
// i-th.
func (w *patchWriter) create(path string, open, close byte, n int, item func(i int)) {
	w.begin(path)
	w.buf = append(w.buf, open)
	for i := range n {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		item(i)
	}
	w.buf = append(w.buf, close, '}')
}

// pointerEscaper escapes a JSON pointer reference token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func (w *patchWriter) done() []byte {
	if w.n == 0 {
		return nil
	}
	return append(w.buf, ']')
}

// appendString appends s to buf as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD (as
// encoding/json does), everything else as it is.
func appendString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
