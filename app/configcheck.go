package app

import (
	"net/url"
	"strconv"
	"strings"
)

// The checks of Validate, and how secrets are masked in what it reports.

func oneOf(s string, options ...string) bool {
	for _, o := range options {
		if s == o {
			return true
		}
	}
	return false
}

func validAddr(a string) bool {
	i := strings.LastIndexByte(a, ':')
	if i < 0 {
		return false
	}
	port, err := strconv.ParseUint(a[i+1:], 10, 16)
	return err == nil && (port > 0 || a[i+1:] == "0")
}

// MinAdminTokenLen is the shortest TOLLGATE_ADMIN_TOKEN accepted: 16
// bytes, so that a token is not guessed (openssl rand -hex 32 gives 64).
const MinAdminTokenLen = 16

// validAdminToken reports whether s can be a bearer token: 16 to 1024
// bytes of RFC 6750's token68 (letters, digits, - . _ ~ + /, then =
// padding), which an Authorization header carries as it is.
func validAdminToken(s string) bool {
	if len(s) < MinAdminTokenLen || len(s) > 1024 {
		return false
	}
	body := strings.TrimRight(s, "=")
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return body != ""
}

// validUpstream reports whether s is an absolute http:// or https:// URL
// with a host, and a port (if any) from 1 to 65535.
func validUpstream(s string) bool {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return false
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		return err == nil && n >= 1 && n <= 65535
	}
	return true
}

// reservedHeader are the headers that frame, route or hop a request:
// a tenant id in one of them would be read from what the HTTP layer owns
// (Host is also not in r.Header at all, so every request would be
// unknown).
var reservedHeader = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Te": true, "Trailer": true, "Upgrade": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Content-Type": true, "Expect": true,
}

// MaskURL returns s with its secrets replaced by "xxxxx": a password, a
// lone user-info field (redis://s3cret@host), which go-redis reads as a
// password, and a password query parameter (?password=…, in any case),
// which go-redis reads too. A value that does not parse as a URL is
// masked whole, since it may still hold one.
func MaskURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if strings.Contains(s, "@") || strings.Contains(strings.ToLower(s), "password") {
			return "<unparsable URL, masked>"
		}
		return s
	}
	masked := false
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		} else {
			u.User = url.User("xxxxx")
		}
		masked = true
	}
	q, qerr := url.ParseQuery(u.RawQuery)
	switch {
	case qerr != nil && strings.Contains(strings.ToLower(u.RawQuery), "password"):
		// A pair that does not parse (a ';', a bad escape) is dropped by
		// the parsed query, and would be printed as it is: the whole
		// query is masked.
		u.RawQuery = "xxxxx"
		masked = true
	case u.RawQuery != "":
		for k := range q {
			if strings.EqualFold(k, "password") {
				q[k] = []string{"xxxxx"}
				masked = true
			}
		}
		if masked {
			u.RawQuery = q.Encode()
		}
	}
	if !masked {
		return s
	}
	return u.String()
}

// upstreamForLog returns the upstream URL as logs and errors show it:
// without its query (which may carry a credential) and with any
// user-info masked. A value that does not parse is masked whole.
func upstreamForLog(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<unparsable URL, masked>"
	}
	hadQuery := u.RawQuery != "" || u.ForceQuery
	u.RawQuery, u.ForceQuery = "", false
	out := MaskURL(u.String())
	if hadQuery {
		out += "?…"
	}
	return out
}
