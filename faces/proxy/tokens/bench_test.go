package tokens_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/faces/proxy/tokens"
)

// stream is an answer of n chunks as OpenAI streams them with usage
// asked (every chunk says "usage":null), its usage event and [DONE].
func stream(n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(chunk1)
	}
	return b.String() + usageOnly + done
}

// writer hides io.Discard's ReaderFrom, so that every copy goes through
// a buffer, as a copy to a network connection does.
type writer struct{ io.Writer }

// BenchmarkRelay compares a stream relayed through the metering body
// (events framed, usage read, the usage event stripped) with the same
// stream copied as it is, both read one event per read, as they come
// off a connection. go test -bench Relay ./faces/proxy/tokens/
func BenchmarkRelay(b *testing.B) {
	in := []byte(stream(2000))
	sizes := []int{len(chunk1)}
	buf := make([]byte, 32<<10)
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(int64(len(in)))
		b.ReportAllocs()
		for b.Loop() {
			src := &chunked{data: in, sizes: sizes}
			if _, err := io.CopyBuffer(writer{io.Discard}, struct{ io.Reader }{src}, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("metered", func(b *testing.B) {
		b.SetBytes(int64(len(in)))
		b.ReportAllocs()
		for b.Loop() {
			resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: &chunked{data: in, sizes: sizes}}
			m := tokens.Meter(resp, tokens.Source{OpenAI: true}, true)
			if _, err := io.CopyBuffer(writer{io.Discard}, struct{ io.Reader }{resp.Body}, buf); err != nil {
				b.Fatal(err)
			}
			if res := m.Result(); res.Used != 11 {
				b.Fatalf("Result = %+v", res)
			}
		}
	})
}
