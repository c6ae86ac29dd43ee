package redis

import (
	"testing"
	"time"
)

// The counter's contract runs against a real Redis in integration/; these
// are its pure parts.

func TestWindowMillis(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   time.Duration
		want int64
	}{
		{0, 1},
		{time.Nanosecond, 1},
		{time.Millisecond, 1},
		{time.Millisecond + 1, 2},
		{1500 * time.Microsecond, 2},
		{time.Minute, 60000},
	} {
		if got := windowMillis(tc.in); got != tc.want {
			t.Errorf("windowMillis(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestServerVersion(t *testing.T) {
	t.Parallel()
	info := "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n"
	if got, err := serverVersion(info); err != nil || got != "7.0.15" {
		t.Errorf("serverVersion = %q, %v; want 7.0.15", got, err)
	}
	if _, err := serverVersion("# Server\r\nuptime_in_seconds:3\r\n"); err == nil {
		t.Error("serverVersion without redis_version: no error")
	}
}

func TestModeString(t *testing.T) {
	t.Parallel()
	for m, want := range map[Mode]string{ModeAuto: "auto", ModePipeline: "pipeline", ModeScript: "script", 9: "Mode(9)"} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", int(m), got, want)
		}
	}
}

func TestModeFor(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]Mode{
		"7.0.15": ModePipeline, "7.2.4": ModePipeline, "10.1.0": ModePipeline,
		"6.2.14": ModeScript, "5.0.7": ModeScript, "": ModeScript, "x.y": ModeScript,
	} {
		if got := modeFor(v); got != want {
			t.Errorf("modeFor(%q) = %v, want %v", v, got, want)
		}
	}
}
