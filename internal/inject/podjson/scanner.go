package podjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
)

// ErrSyntax is returned for input that is not well-formed JSON as far as
// the scanner read it.
var ErrSyntax = errors.New("malformed pod JSON")

// scanner reads JSON the API server wrote. It checks structure as far as it
// reads and reports malformed input instead of panicking.
type scanner struct {
	b   []byte
	i   int
	err error
}

func (s *scanner) fail() {
	if s.err == nil {
		s.err = fmt.Errorf("%w at offset %d", ErrSyntax, s.i)
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

// members ranges over the keys of the object that comes next (none for
// null); the loop body reads or skips each member's value.
func (s *scanner) members() iter.Seq[[]byte] {
	return func(yield func(key []byte) bool) {
		if !s.begin('{') {
			return
		}
		for first := true; s.more(&first, '}'); {
			if !yield(s.key()) {
				return
			}
		}
	}
}

// end checks that only white space follows the value read (a patch library
// reads the whole body, and the API server never sends more) and returns
// the scan's error.
func (s *scanner) end() error {
	if s.ws(); s.err == nil && s.i != len(s.b) {
		s.fail()
	}
	return s.err
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
	if s.null() {
		return nil, false
	}
	m := make(map[string]string, 8)
	for key := range s.members() {
		m[string(key)] = s.string()
	}
	return m, true
}
