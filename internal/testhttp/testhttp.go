// Package testhttp sends the requests tests make, as given.
package testhttp

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Do sends one request to url with body and header, exactly as given
// (header names are not canonicalized; a "Host" entry sets the request's
// host), and returns the response and its whole body. It fails t on a
// transport error.
func Do(t testing.TB, method, url, body string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// Raw writes request, bytes as given (a stalled body: a Content-Length
// longer than what follows), on a new connection to base (such as
// http://127.0.0.1:41234), and reads one response: its status, its whole
// body, and whether the server then closed the connection. It fails t
// when no answer comes within 10 s.
func Raw(t testing.TB, base, request string) (status int, body string, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to %q: %v", request, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, err = br.ReadByte()
	return resp.StatusCode, string(b), err == io.EOF
}
