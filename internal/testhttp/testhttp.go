// Package testhttp sends the requests tests make, as given.
package testhttp

import (
	"io"
	"net/http"
	"strings"
	"testing"
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
