package rlsconf

import "bytes"

// matchParts reports whether s matches a pattern split on '*' (at least two
// parts): s starts with the first part, ends with the last, and holds the
// middle parts in order between them, without overlap; each '*' stands for
// any run of bytes, the empty one included. No other character is special.
// Taking each middle part at its leftmost place is enough: a later place
// only leaves less room for the parts after it.
func matchParts(parts [][]byte, s []byte) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(first)+len(last) > len(s) ||
		!bytes.HasPrefix(s, first) || !bytes.HasSuffix(s, last) {
		return false
	}
	rest := s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := bytes.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}
