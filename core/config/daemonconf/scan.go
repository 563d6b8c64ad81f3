package daemonconf

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds nesting as encoding/json does.
const maxDepth = 10000

// readKeys returns the string values of the top-level keys daemonSocket
// and daemonWait of a JSON object, decoded as encoding/json decodes them
// into string fields with those exact names: the last occurrence wins, null
// leaves the value as it was, and any other type is an error. The whole
// document must be valid JSON.
func readKeys(b []byte) (socket, wait string, err error) {
	s := &scanner{b: b}
	s.space()
	if !s.take('{') {
		return "", "", s.fail("want an object")
	}
	s.space()
	if s.take('}') {
		return "", "", s.end()
	}
	for {
		s.space()
		key, err := s.str()
		if err != nil {
			return "", "", err
		}
		s.space()
		if !s.take(':') {
			return "", "", s.fail("want ':' after object key")
		}
		s.space()
		switch key {
		case "daemonSocket":
			err = s.stringOrNull(key, &socket)
		case "daemonWait":
			err = s.stringOrNull(key, &wait)
		default:
			err = s.value(1)
		}
		if err != nil {
			return "", "", err
		}
		s.space()
		if s.take('}') {
			return socket, wait, s.end()
		}
		if !s.take(',') {
			return "", "", s.fail("want ',' or '}' in object")
		}
	}
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) fail(what string) error {
	if s.i >= len(s.b) {
		return errors.New("unexpected end of JSON input")
	}
	return errors.New("invalid character " + strconv.QuoteRune(rune(s.b[s.i])) + " at offset " + strconv.Itoa(s.i) + ": " + what)
}

func (s *scanner) end() error {
	s.space()
	if s.i < len(s.b) {
		return s.fail("data after the top-level value")
	}
	return nil
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) take(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) stringOrNull(key string, dst *string) error {
	if s.i < len(s.b) && s.b[s.i] == 'n' {
		return s.literal("null")
	}
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		if err := s.value(1); err != nil {
			return err
		}
		return errors.New(strconv.Quote(key) + " must be a string")
	}
	v, err := s.str()
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// value skips one value of any kind, checking it.
func (s *scanner) value(depth int) error {
	if depth > maxDepth {
		return errors.New("exceeded max depth")
	}
	if s.i >= len(s.b) {
		return s.fail("want a value")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.container(depth, '}', true)
	case c == '[':
		return s.container(depth, ']', false)
	case c == '"':
		_, err := s.str()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return s.fail("want a value")
}

// container skips an object (keyed) or an array.
func (s *scanner) container(depth int, closing byte, keyed bool) error {
	s.i++
	s.space()
	if s.take(closing) {
		return nil
	}
	for {
		s.space()
		if keyed {
			if _, err := s.str(); err != nil {
				return err
			}
			s.space()
			if !s.take(':') {
				return s.fail("want ':' after object key")
			}
			s.space()
		}
		if err := s.value(depth + 1); err != nil {
			return err
		}
		s.space()
		if s.take(closing) {
			return nil
		}
		if !s.take(',') {
			return s.fail("want ',' or " + strconv.QuoteRune(rune(closing)))
		}
	}
}

func (s *scanner) literal(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return s.fail("want " + word)
	}
	s.i += len(word)
	return nil
}

// number checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	s.take('-')
	if s.take('0') {
	} else if !s.digits() {
		return s.fail("want a digit")
	}
	if s.take('.') && !s.digits() {
		return s.fail("want a digit after '.'")
	}
	if s.take('e') || s.take('E') {
		if !s.take('+') {
			s.take('-')
		}
		if !s.digits() {
			return s.fail("want a digit in the exponent")
		}
	}
	return nil
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// str decodes a string as encoding/json does: escapes resolved, a lone
// surrogate and every byte of invalid UTF-8 replaced by U+FFFD.
func (s *scanner) str() (string, error) {
	if !s.take('"') {
		return "", s.fail("want a string")
	}
	var out []byte
	for {
		if s.i >= len(s.b) {
			return "", s.fail("unterminated string")
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(out), nil
		case c < 0x20:
			return "", s.fail("control character in string")
		case c == '\\':
			var err error
			if out, err = s.escape(out); err != nil {
				return "", err
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			out = utf8.AppendRune(out, r) // RuneError for a bad byte
			s.i += size
		}
	}
}

func (s *scanner) escape(out []byte) ([]byte, error) {
	if s.i+1 >= len(s.b) {
		return nil, s.fail("unterminated escape")
	}
	s.i++
	if c, ok := unescape(s.b[s.i]); ok {
		s.i++
		return append(out, c), nil
	}
	if s.b[s.i] != 'u' {
		return nil, s.fail("invalid escape")
	}
	r, ok := hex4(s.b[s.i+1:])
	if !ok {
		return nil, s.fail("invalid \\u escape")
	}
	s.i += 5
	if r >= 0xd800 && r < 0xdc00 { // a high surrogate: a pair, or U+FFFD
		if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
			if lo, ok := hex4(s.b[s.i+2:]); ok && lo >= 0xdc00 && lo < 0xe000 {
				s.i += 6
				return utf8.AppendRune(out, (r-0xd800)<<10|(lo-0xdc00)+0x10000), nil
			}
		}
		return utf8.AppendRune(out, utf8.RuneError), nil
	}
	if r >= 0xdc00 && r < 0xe000 {
		r = utf8.RuneError
	}
	return utf8.AppendRune(out, r), nil
}

// unescape resolves the one-letter escapes.
func unescape(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
