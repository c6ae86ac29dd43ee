package fleet

import (
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/domain"
)

// TestParseReset: a reset's message is a tenant id, then a line per key
// suffix (an empty one for the tenant's bare key); anything else is not
// a reset, so that a message can name only one tenant's keys.
func TestParseReset(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		msg    string
		tenant domain.TenantID
		keys   []string
		ok     bool
	}{
		{"acme", "acme", nil, true},
		{"acme\n", "acme", []string{""}, true},
		{"acme\n:per-day\n:route:export:exports\n:sliding_window:hourly", "acme", []string{":per-day", ":route:export:exports", ":sliding_window:hourly"}, true},
		{"not a tenant!", "", nil, false},
		{"acme\n}:x", "", nil, false},                                            // out of the tenant's keys
		{"acme\n:x{globex}", "", nil, false},                                     // another tenant's
		{"acme\n:per day", "", nil, false},                                       // not a key's characters
		{"acme\n" + strings.Repeat(":a\n", maxResetKeys) + ":a", "", nil, false}, // too many
		{"acme\n" + strings.Repeat("a", 4*domain.MaxNameLen+1), "", nil, false},
	} {
		tenant, keys, ok := parseReset(tt.msg)
		if ok != tt.ok || tenant != tt.tenant || !slices.Equal(keys, tt.keys) {
			t.Errorf("parseReset(%.40q) = %q, %q, %v; want %q, %q, %v", tt.msg, tenant, keys, ok, tt.tenant, tt.keys, tt.ok)
		}
	}
}
