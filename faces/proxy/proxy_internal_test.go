package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
)

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// TestIsTimeout: a dial that times out is an unreachable upstream (502);
// only a slow answer is a timeout (504).
func TestIsTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Net: "tcp", Err: timeoutError{}}, false},
		{fmt.Errorf("proxy: %w", &net.OpError{Op: "dial", Net: "tcp", Err: timeoutError{}}), false},
		{&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, false},
		{&net.OpError{Op: "read", Net: "tcp", Err: timeoutError{}}, true},
		{timeoutError{}, true},
		{context.DeadlineExceeded, true},
		{errors.New("EOF"), false},
	}
	for _, tt := range tests {
		if got := isTimeout(tt.err); got != tt.want {
			t.Errorf("isTimeout(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
