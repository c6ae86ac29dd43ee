package domain_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/domain"
)

func TestParseTenantID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in string
		ok bool
	}{
		{"acme", true},
		{"A-Z_a.z-09", true},
		{strings.Repeat("x", 64), true},
		{"unknown", true},
		{"", false},
		{strings.Repeat("x", 65), false},
		{"acme corp", false},
		{"acme/1", false},
		{"rl:acme", false},
		{"acme\n", false},
		{"ac\x00me", false},
		{"*", false},
		{"é", false},
	}
	for _, tt := range tests {
		id, err := domain.ParseTenantID(tt.in)
		if tt.ok {
			if err != nil || string(id) != tt.in {
				t.Errorf("ParseTenantID(%q) = %q, %v; want %q, nil", tt.in, id, err, tt.in)
			}
		} else if !errors.Is(err, domain.ErrInvalidTenant) {
			t.Errorf("ParseTenantID(%q) error = %v, want ErrInvalidTenant", tt.in, err)
		}
		if got := domain.ValidTenantID(tt.in); got != tt.ok {
			t.Errorf("ValidTenantID(%q) = %v, want %v", tt.in, got, tt.ok)
		}
		want := domain.TenantID(tt.in)
		if !tt.ok {
			want = domain.Unknown
		}
		if got := domain.TenantOrUnknown(tt.in); got != want {
			t.Errorf("TenantOrUnknown(%q) = %q, want %q", tt.in, got, want)
		}
	}
}

func TestParseTenantIDErrorDoesNotEchoInput(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("secret", 20)
	_, err := domain.ParseTenantID(in)
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("ParseTenantID(long) error = %v, want one that does not repeat the input", err)
	}
}
