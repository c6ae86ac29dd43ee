// Package logtest reads the JSON log lines tollgate writes, for tests.
package logtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Buffer is a bytes.Buffer that a logger and a test may share: it is
// safe for concurrent use by multiple goroutines.
type Buffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the lines written so far whose msg is msg, decoded (see
// [Lines]).
func (b *Buffer) Lines(t testing.TB, msg string) []map[string]any {
	t.Helper()
	return Lines(t, b.String(), msg)
}

// Lines returns the JSON lines of text whose msg is msg, decoded, in
// order. A line that is not JSON fails t: every line tollgate logs is.
func Lines(t testing.TB, text, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}
