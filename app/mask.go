package app

import (
	"net/url"
	"strings"
)

// How secrets are masked in what config errors and logs show.

// unparsableURL stands for a value that does not parse as a URL and may
// hold a secret.
const unparsableURL = "<unparsable URL, masked>"

// MaskURL returns s with its secrets replaced by "xxxxx": a password, a
// lone user-info field (redis://s3cret@host), which go-redis reads as a
// password, a password query parameter (?password=…, in any case),
// and the user-info of a cluster seed (?addr=user:s3cret@host:port), or
// what comes before an '@' in any other query value. A value that does not parse as a URL is
// masked whole, since it may still hold one.
func MaskURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if strings.Contains(s, "@") || strings.Contains(strings.ToLower(s), "password") {
			return unparsableURL
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
	case qerr != nil && (strings.ContainsAny(u.RawQuery, "@%") || strings.Contains(strings.ToLower(u.RawQuery), "password")):
		// A pair that does not parse (a ';', a bad escape) is dropped by
		// the parsed query, and would be printed as it is: the whole
		// query is masked when it may hold a secret, a "password" or an
		// '@', escaped or not (%40, pass%77ord).
		u.RawQuery = "xxxxx"
		masked = true
	case u.RawQuery != "":
		for k, vs := range q {
			if strings.EqualFold(k, "password") {
				q[k] = []string{"xxxxx"}
				masked = true
				continue
			}
			// A cluster seed given user-info of its own
			// (addr=user:s3cret@host:port: refused, but shown in the
			// refusal), or any other value with an '@' (no go-redis
			// option holds one): what comes before the '@' is masked.
			for i, v := range vs {
				at := strings.LastIndexByte(v, '@')
				if at < 0 {
					continue
				}
				if user, _, ok := strings.Cut(v[:at], ":"); ok {
					vs[i] = user + ":xxxxx" + v[at:]
				} else {
					vs[i] = "xxxxx" + v[at:]
				}
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
// without its query (which may carry a credential) or fragment (which
// Validate refuses) and with any user-info masked. A value that does not parse is masked whole.
func upstreamForLog(s string) string {
	if !strings.Contains(s, "://") {
		// host:port, or a bare host: shown as the URL it lacks the
		// scheme of, less that scheme (user:s3cret@svc would otherwise
		// parse as the scheme "user").
		if shown := upstreamForLog("http://" + s); shown != unparsableURL {
			return strings.TrimPrefix(shown, "http://")
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return unparsableURL
	}
	hadQuery := u.RawQuery != "" || u.ForceQuery
	hadFragment := u.Fragment != "" || strings.Contains(s, "#")
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	out := MaskURL(u.String())
	if hadQuery {
		out += "?…"
	}
	if hadFragment { // refused, and not shown: it may be a query put after it
		out += "#…"
	}
	return out
}
