package main

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/logtest"
)

// TestMain runs the command itself when the test binary is started as
// the gateway (see gateway).
func TestMain(m *testing.M) {
	if os.Getenv("TOLLGATE_TEST_RUN_MAIN") == "1" {
		os.Args = os.Args[:1]
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestStderrIsJSON: every line the process writes on stderr is a JSON
// log line, also what net/http's client writes through the standard
// logger when an upstream sends bytes on an idle connection, which
// would otherwise be a plain-text line among the JSON ones.
func TestStderrIsJSON(t *testing.T) {
	upstream := unsolicitedUpstream(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "TOLLGATE_TEST_RUN_MAIN=1",
		"TOLLGATE_LISTEN_ADDR=127.0.0.1:0", "TOLLGATE_ADMIN_ADDR=127.0.0.1:0", "TOLLGATE_UPSTREAM_URL=http://"+upstream)
	var stderr logtest.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	public := waitListening(t, &stderr)
	resp, err := http.Get("http://" + public + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, "net/http's line", func() bool { return strings.Contains(stderr.String(), "Unsolicited response") })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	for sc.Scan() {
		var line struct{ Level, Msg string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Msg == "" {
			t.Errorf("a line on stderr that is no JSON log line: %q", sc.Text())
		} else if strings.Contains(line.Msg, "Unsolicited response") && line.Level != "WARN" {
			t.Errorf("net/http's line at %s, want WARN: %q", line.Level, sc.Text())
		}
	}
}

// unsolicitedUpstream serves HTTP/1.1 on loopback and answers every
// request with a 200 and, after it, bytes no request asked for.
func unsolicitedUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				if _, err := http.ReadRequest(r); err != nil {
					return
				}
				_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
				time.Sleep(200 * time.Millisecond) // the connection is idle in the pool
				_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
				time.Sleep(time.Second)
			}()
		}
	}()
	return ln.Addr().String()
}

// waitListening returns the public address of the "tollgate listening"
// line on stderr.
func waitListening(t *testing.T, stderr *logtest.Buffer) string {
	t.Helper()
	var public string
	waitFor(t, "the listening line", func() bool {
		for _, l := range strings.Split(stderr.String(), "\n") {
			var line struct{ Msg, Public string }
			if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "tollgate listening" {
				public = line.Public
				return true
			}
		}
		return false
	})
	return public
}

// waitFor polls cond every 20 ms for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 10s", what)
}
