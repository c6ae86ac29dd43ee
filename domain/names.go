package domain

import "strings"

// ValidName reports whether s can name a limit or a route: 1 to
// [MaxNameLen] bytes of a-z 0-9 -. Such a name is a valid structured
// field string, metric label and key part as it is.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ValidToken reports whether s is an RFC 9110 token, as an HTTP method
// and a header name are.
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
