package sidecarset

import (
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/types"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// encodedSet is a SidecarSet's injectable parts, JSON-encoded once per
// generation so that admitting a pod copies bytes instead of encoding
// containers again.
type encodedSet struct {
	uid              types.UID
	generation       int64
	initContainers   []encodedContainer
	containers       []encodedContainer
	volumes          [][]byte
	imagePullSecrets [][]byte
}

// encodedContainer is one sidecar, encoded.
type encodedContainer struct {
	// full is the container as injected when no policy changes it.
	full []byte
	// base is the container without env and volumeMounts; env and mounts
	// are its own, element by element, for splicing in transferred env and
	// shared mounts.
	base   []byte
	env    []rawElement // keyed by name
	mounts []rawElement // keyed by mountPath
}

var encodedCache sync.Map // SidecarSet name -> *encodedSet

// encoded returns the encoded form of s, computed once per generation.
func encoded(s *deckhandv1alpha1.SidecarSet, _ *sidecarcontrol.Compiled) *encodedSet {
	if v, ok := encodedCache.Load(s.Name); ok {
		e := v.(*encodedSet)
		if e.uid == s.UID && e.generation == s.Generation && s.Generation != 0 {
			return e
		}
	}
	e := &encodedSet{uid: s.UID, generation: s.Generation}
	for i := range s.Spec.InitContainers {
		e.initContainers = append(e.initContainers, encodeContainer(&s.Spec.InitContainers[i]))
	}
	for i := range s.Spec.Containers {
		e.containers = append(e.containers, encodeContainer(&s.Spec.Containers[i]))
	}
	for i := range s.Spec.Volumes {
		e.volumes = append(e.volumes, mustJSON(&s.Spec.Volumes[i]))
	}
	for i := range s.Spec.ImagePullSecrets {
		e.imagePullSecrets = append(e.imagePullSecrets, mustJSON(&s.Spec.ImagePullSecrets[i]))
	}
	if s.Generation != 0 {
		encodedCache.Store(s.Name, e)
	}
	return e
}

// forgetEncoded drops the encoded form of a deleted SidecarSet.
func forgetEncoded(name string) { encodedCache.Delete(name) }

func encodeContainer(sc *deckhandv1alpha1.SidecarContainer) encodedContainer {
	e := encodedContainer{full: mustJSON(&sc.Container)}
	if len(sc.TransferEnv) == 0 && sc.ShareVolumePolicy.Type != deckhandv1alpha1.ShareVolumePolicyEnabled {
		return e
	}
	base := sc.Container
	base.Env, base.VolumeMounts = nil, nil
	e.base = mustJSON(&base)
	for i := range sc.Env {
		e.env = append(e.env, rawElement{key: sc.Env[i].Name, raw: mustJSON(&sc.Env[i])})
	}
	for i := range sc.VolumeMounts {
		e.mounts = append(e.mounts, rawElement{key: sc.VolumeMounts[i].MountPath, raw: mustJSON(&sc.VolumeMounts[i])})
	}
	return e
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Everything encoded here was decoded from JSON by the API server.
		panic(err)
	}
	return b
}

// appContainers gives lazy access to the env and mounts of the pod's own
// containers, split only when a sidecar transfers env or shares volumes.
type appContainers struct {
	pod          *podView
	mounts       []rawElement
	mountsLoaded bool
}

func (a *appContainers) env(container string) ([]rawElement, error) {
	for _, list := range [][]containerView{a.pod.containers, a.pod.initContainers} {
		for i := range list {
			if list[i].name == container {
				return elements(list[i].env, "name")
			}
		}
	}
	return nil, nil
}

func (a *appContainers) allMounts() ([]rawElement, error) {
	if a.mountsLoaded {
		return a.mounts, nil
	}
	a.mountsLoaded = true
	a.mounts = make([]rawElement, 0, 2*len(a.pod.containers))
	for i := range a.pod.containers {
		ms, err := elements(a.pod.containers[i].volumeMounts, "mountPath")
		if err != nil {
			return nil, err
		}
		a.mounts = append(a.mounts, ms...)
	}
	return a.mounts, nil
}

// appendContainer appends the JSON of the sidecar to inject: its encoded
// form, or, when it transfers env or shares volumes, its base with the
// resulting env and volumeMounts spliced in.
func (a *appContainers) appendContainer(buf []byte, pc pendingContainer) ([]byte, error) {
	sc, enc := pc.sc, pc.enc
	if enc.base == nil {
		return append(buf, enc.full...), nil
	}
	env := enc.env
	if len(sc.TransferEnv) > 0 {
		env = append([]rawElement(nil), enc.env...)
		for _, t := range sc.TransferEnv {
			src, err := a.env(t.SourceContainerName)
			if err != nil {
				return nil, err
			}
			for _, e := range src {
				if e.key != t.EnvName {
					continue
				}
				replaced := false
				for j := range env {
					if env[j].key == t.EnvName {
						env[j], replaced = e, true
					}
				}
				if !replaced {
					env = append(env, e)
				}
				break
			}
		}
	}
	mounts := enc.mounts
	if sc.ShareVolumePolicy.Type == deckhandv1alpha1.ShareVolumePolicyEnabled {
		shared, err := a.allMounts()
		if err != nil {
			return nil, err
		}
		if len(shared) > 0 {
			mounts = append([]rawElement(nil), enc.mounts...)
			for _, m := range shared {
				taken := false
				for j := range mounts {
					if mounts[j].key == m.key {
						taken = true
						break
					}
				}
				if !taken {
					mounts = append(mounts, m)
				}
			}
		}
	}
	buf = append(buf, enc.base[:len(enc.base)-1]...) // without the closing brace
	buf = appendRawList(buf, `,"env":`, env)
	buf = appendRawList(buf, `,"volumeMounts":`, mounts)
	return append(buf, '}'), nil
}

func appendRawList(buf []byte, prefix string, list []rawElement) []byte {
	if len(list) == 0 {
		return buf
	}
	buf = append(buf, prefix...)
	buf = append(buf, '[')
	for i, e := range list {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, e.raw...)
	}
	return append(buf, ']')
}

// patchWriter writes a JSON patch of "add" operations.
type patchWriter struct {
	buf []byte
	n   int
}

// begin opens an "add" operation at path; the caller writes the value and '}'.
func (w *patchWriter) begin(path string) {
	if w.n == 0 {
		w.buf = append(w.buf, '[')
	} else {
		w.buf = append(w.buf, ',')
	}
	w.n++
	w.buf = append(w.buf, `{"op":"add","path":`...)
	w.buf = appendJSONString(w.buf, path)
	w.buf = append(w.buf, `,"value":`...)
}

func (w *patchWriter) stringOp(path, value string) {
	w.begin(path)
	w.buf = appendJSONString(w.buf, value)
	w.buf = append(w.buf, '}')
}

func (w *patchWriter) rawOp(path string, value []byte) {
	w.begin(path)
	w.buf = append(w.buf, value...)
	w.buf = append(w.buf, '}')
}

// containers puts before at the head of the list at path and after at its
// tail, or creates the list when the pod has none.
func (w *patchWriter) containers(path string, absent bool, before, after []pendingContainer, apps *appContainers) error {
	if len(before)+len(after) == 0 {
		return nil
	}
	var err error
	if absent {
		w.begin(path)
		w.buf = append(w.buf, '[')
		for i, pc := range append(before, after...) {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			if w.buf, err = apps.appendContainer(w.buf, pc); err != nil {
				return err
			}
		}
		w.buf = append(w.buf, "]}"...)
		return nil
	}
	for i, pc := range before {
		w.begin(path + "/" + strconv.Itoa(i))
		if w.buf, err = apps.appendContainer(w.buf, pc); err != nil {
			return err
		}
		w.buf = append(w.buf, '}')
	}
	for _, pc := range after {
		w.begin(path + "/-")
		if w.buf, err = apps.appendContainer(w.buf, pc); err != nil {
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
		w.begin(path)
		w.buf = append(w.buf, '[')
		for i, it := range items {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.buf = append(w.buf, it...)
		}
		w.buf = append(w.buf, "]}"...)
		return
	}
	for _, it := range items {
		w.rawOp(path+"/-", it)
	}
}

func (w *patchWriter) done() []byte {
	if w.n == 0 {
		return nil
	}
	return append(w.buf, ']')
}

// appendJSONString appends s as a JSON string.
func appendJSONString(buf []byte, s string) []byte {
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
