package sidecarset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// podView is the part of a pod the injector reads, decoded by a small
// single-pass scanner straight from the admission request's raw JSON. The
// app containers' env and volumeMounts stay raw (slices of the request) and
// are only looked at when a sidecar transfers env or shares volumes. The
// injector never re-encodes anything of the pod, so fields it does not know
// are never touched.
type podView struct {
	name, generateName, namespace string
	labels                        map[string]string
	annotations                   map[string]string
	hasAnnotations                bool

	hasSpec                    bool
	initContainers, containers []containerView
	hasInitContainers          bool
	volumes                    []string
	hasVolumes                 bool
	imagePullSecrets           []string
	hasImagePullSecrets        bool
}

type containerView struct {
	name         string
	env          []byte // raw JSON array or nil
	volumeMounts []byte // raw JSON array or nil
}

var (
	errSyntax = errors.New("malformed pod JSON")
	// errNoSpec: a pod without a spec object has nowhere to put a sidecar.
	// The API server never sends one (spec.containers is required), but a
	// webhook must not answer it with a patch that cannot apply.
	errNoSpec = errors.New("the pod has no spec object")
)

// scanner reads JSON the API server wrote. It checks structure as far as it
// reads and reports malformed input instead of panicking.
type scanner struct {
	b   []byte
	i   int
	err error
}

func (s *scanner) fail() {
	if s.err == nil {
		s.err = fmt.Errorf("%w at offset %d", errSyntax, s.i)
	}
	s.i = len(s.b)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		s.fail()
		return 0
	}
	return s.b[s.i]
}

// null consumes a null literal if one is next.
func (s *scanner) null() bool {
	if s.peek() == 'n' {
		if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
			s.i += 4
			return true
		}
		s.fail()
	}
	return false
}

// begin consumes c ('{' or '[') and reports whether a value follows (false for null).
func (s *scanner) begin(c byte) bool {
	if s.null() {
		return false
	}
	if s.peek() != c {
		s.fail()
		return false
	}
	s.i++
	return true
}

// more reports whether another member or element follows in the object or
// array closed by end, consuming the separator (or the end).
func (s *scanner) more(first *bool, end byte) bool {
	c := s.peek()
	if s.err != nil {
		return false
	}
	if c == end {
		s.i++
		return false
	}
	if !*first {
		if c != ',' {
			s.fail()
			return false
		}
		s.i++
	}
	*first = false
	return true
}

// key reads an object key and the colon after it. The bytes may alias the input.
func (s *scanner) key() []byte {
	k := s.str()
	if s.peek() != ':' {
		s.fail()
		return nil
	}
	s.i++
	return k
}

// str reads a string; the bytes alias the input unless it had escapes.
func (s *scanner) str() []byte {
	if s.peek() != '"' {
		s.fail()
		return nil
	}
	start := s.i + 1
	escaped := false
	for {
		j := bytes.IndexByte(s.b[s.i+1:], '"')
		if j < 0 {
			s.fail()
			return nil
		}
		end := s.i + 1 + j
		// The quote is escaped if an odd number of backslashes precede it.
		n := 0
		for k := end - 1; k >= start && s.b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 1 {
			escaped = true
			s.i = end
			continue
		}
		s.i = end + 1
		if !escaped && bytes.IndexByte(s.b[start:end], '\\') < 0 {
			return s.b[start:end]
		}
		var out string
		if err := json.Unmarshal(s.b[start-1:s.i], &out); err != nil {
			s.fail()
			return nil
		}
		return []byte(out)
	}
}

// string reads a string value (null reads as "").
func (s *scanner) string() string {
	if s.null() {
		return ""
	}
	return string(s.str())
}

// skip skips one value of any kind.
func (s *scanner) skip() {
	switch c := s.peek(); c {
	case '"':
		s.str()
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				s.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return
				}
			}
			s.i++
		}
		s.fail()
	default:
		// a number or a literal: up to the next delimiter
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if s.i == start {
					s.fail()
				}
				return
			}
			s.i++
		}
	}
}

// raw returns the bytes of the next value (aliasing the input), nil for null.
func (s *scanner) raw() []byte {
	if s.null() {
		return nil
	}
	s.ws()
	start := s.i
	s.skip()
	return s.b[start:s.i]
}

func (s *scanner) stringMap() (map[string]string, bool) {
	if !s.begin('{') {
		return nil, false
	}
	m := make(map[string]string, 8)
	for first := true; s.more(&first, '}'); {
		k := string(s.key())
		m[k] = s.string()
	}
	return m, true
}

// decodePodView reads what the injector needs from a pod's JSON.
func decodePodView(raw []byte, p *podView) error {
	s := &scanner{b: raw}
	if !s.begin('{') {
		return errSyntax
	}
	for first := true; s.more(&first, '}'); {
		switch string(s.key()) {
		case "metadata":
			s.metadata(p)
		case "spec":
			s.spec(p)
		default:
			s.skip()
		}
	}
	if s.err == nil && !p.hasSpec {
		return errNoSpec
	}
	return s.err
}

func (s *scanner) metadata(p *podView) {
	if !s.begin('{') {
		return
	}
	for first := true; s.more(&first, '}'); {
		switch string(s.key()) {
		case "name":
			p.name = s.string()
		case "generateName":
			p.generateName = s.string()
		case "namespace":
			p.namespace = s.string()
		case "labels":
			p.labels, _ = s.stringMap()
		case "annotations":
			p.annotations, p.hasAnnotations = s.stringMap()
		default:
			s.skip()
		}
	}
}

func (s *scanner) spec(p *podView) {
	if !s.begin('{') {
		return
	}
	p.hasSpec = true
	for first := true; s.more(&first, '}'); {
		switch string(s.key()) {
		case "containers":
			p.containers, _ = s.containers()
		case "initContainers":
			p.initContainers, p.hasInitContainers = s.containers()
		case "volumes":
			p.volumes, p.hasVolumes = s.names()
		case "imagePullSecrets":
			p.imagePullSecrets, p.hasImagePullSecrets = s.names()
		default:
			s.skip()
		}
	}
}

func (s *scanner) containers() ([]containerView, bool) {
	if !s.begin('[') {
		return nil, false
	}
	out := make([]containerView, 0, 8)
	for first := true; s.more(&first, ']'); {
		var c containerView
		if s.begin('{') {
			for f := true; s.more(&f, '}'); {
				switch string(s.key()) {
				case "name":
					c.name = s.string()
				case "env":
					c.env = s.raw()
				case "volumeMounts":
					c.volumeMounts = s.raw()
				default:
					s.skip()
				}
			}
		}
		out = append(out, c)
	}
	return out, true
}

// names reads an array of objects and returns their "name" members.
func (s *scanner) names() ([]string, bool) {
	if !s.begin('[') {
		return nil, false
	}
	out := make([]string, 0, 8)
	for first := true; s.more(&first, ']'); {
		out = append(out, s.nameOf())
	}
	return out, true
}

// nameOf reads an object and returns its "name" member.
func (s *scanner) nameOf() string {
	return s.memberOf("name")
}

// memberOf reads an object and returns its string member called key.
func (s *scanner) memberOf(key string) string {
	v := ""
	if !s.begin('{') {
		return v
	}
	for f := true; s.more(&f, '}'); {
		if string(s.key()) == key {
			v = s.string()
		} else {
			s.skip()
		}
	}
	return v
}

// rawElement is one element of a raw JSON array with the string member the
// injector keys it by (an env var's name, a mount's mountPath).
type rawElement struct {
	key string
	raw []byte
}

// elements splits a raw JSON array of objects into its elements.
func elements(raw []byte, key string) ([]rawElement, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	s := &scanner{b: raw}
	if !s.begin('[') {
		return nil, s.err
	}
	out := make([]rawElement, 0, 4)
	for first := true; s.more(&first, ']'); {
		s.ws()
		start := s.i
		k := s.memberOf(key)
		out = append(out, rawElement{key: k, raw: raw[start:s.i]})
	}
	return out, s.err
}
