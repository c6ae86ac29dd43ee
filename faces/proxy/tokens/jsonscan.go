package tokens

// maxUsageObject bounds the usage object a JSON answer's scan keeps; a
// larger one is absurd, and counts as none.
const maxUsageObject = 64 << 10

// jsonScan finds the top-level "usage" member of a JSON object as its
// bytes go by, in constant memory whatever the object's size: it keeps
// only that member's value (at most maxUsageObject bytes). A member
// named twice is read as its last value, as encoding/json reads it.
// Bytes that are not a JSON object find nothing.
type jsonScan struct {
	last       []byte // the last whole usage value; nil before one
	depth      int
	top        byte // the outermost container's opening byte; 0 before it
	inString   bool
	escaped    bool // the last byte in a string was an unescaped '\'
	expectKey  bool // at depth 1 of the object, the next string is a name
	readingKey bool // the string being read is a depth-1 name
	key        [len("usage")]byte
	keyLen     int  // bytes of the name read; past len(key): not usage
	isUsage    bool // the last depth-1 name was "usage", its value not begun
	capturing  bool // the bytes are usage's value
	overflow   bool // the value outgrew maxUsageObject
	value      []byte
}

// write scans p, the next bytes of the answer.
func (s *jsonScan) write(p []byte) {
	for _, c := range p {
		if s.inString {
			switch {
			case s.escaped:
				s.escaped = false
				s.keyLen = len(s.key) + 1 // an escape in a name: not plain "usage"
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString = false
				if s.readingKey {
					s.readingKey = false
					s.isUsage = s.keyLen == len(s.key) && string(s.key[:]) == "usage"
				}
			case s.readingKey:
				if s.keyLen < len(s.key) {
					s.key[s.keyLen] = c
				}
				s.keyLen++
			}
			s.keep(c)
			continue
		}
		switch c {
		case '"':
			s.inString = true
			if s.depth == 1 && s.expectKey {
				s.readingKey, s.expectKey, s.keyLen = true, false, 0
			}
		case '{', '[':
			if s.depth == 0 {
				s.top = c
				s.expectKey = c == '{'
			}
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth == 0 {
				s.end()
				continue
			}
		case ',':
			if s.depth == 1 {
				s.end()
				s.expectKey = s.top == '{'
				continue
			}
		case ':':
			if s.depth == 1 && s.isUsage {
				s.isUsage, s.capturing, s.overflow, s.value = false, true, false, s.value[:0]
				continue
			}
		}
		s.keep(c)
	}
}

// keep adds c to the usage value being read, if one is.
func (s *jsonScan) keep(c byte) {
	if !s.capturing || s.overflow {
		return
	}
	if len(s.value) >= maxUsageObject {
		s.overflow = true
		return
	}
	s.value = append(s.value, c)
}

// end ends the depth-1 value being read: usage's is kept (one past
// maxUsageObject as none).
func (s *jsonScan) end() {
	if s.capturing {
		s.last = append(s.last[:0], s.value...)
		if s.overflow {
			s.last = append(s.last[:0], "null"...)
		}
	}
	s.capturing = false
}
