package rls_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/faces/rls"
)

// TestWatchBound: past Options.MaxWatches open Health watches, a Watch is
// refused RESOURCE_EXHAUSTED; once one ends, another is accepted.
func TestWatchBound(t *testing.T) {
	t.Parallel()
	const bound = 3
	f := newFaceWith(t, basicYAML, faceOptions{opts: rls.Options{MaxWatches: bound}})
	_, conn := serveGRPC(t, f)
	h := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	open := func() (healthpb.HealthCheckResponse_ServingStatus, context.CancelFunc, error) {
		wctx, wcancel := context.WithCancel(ctx)
		w, err := h.Watch(wctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return 0, wcancel, err
		}
		r, err := w.Recv()
		if err != nil {
			return 0, wcancel, err
		}
		return r.Status, wcancel, nil
	}
	var stops []context.CancelFunc
	for i := range bound {
		st, stop, err := open()
		if err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("watch %d of %d: %v, %v; want SERVING", i+1, bound, st, err)
		}
		stops = append(stops, stop)
	}
	for i := range 3 {
		st, stop, err := open()
		stop()
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("watch %d past the bound of %d: %v, %v; want RESOURCE_EXHAUSTED", i+1, bound, st, err)
		}
	}
	// Unary checks are not bounded by the watches.
	if r, err := h.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Check with every watch taken: %v, %v; want SERVING", r, err)
	}
	stops[0]()
	for {
		st, stop, err := open()
		if err == nil {
			stops = append(stops, stop)
			if st != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("a watch after one ended: %v, want SERVING", st)
			}
			break
		}
		stop()
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("a watch after one ended: %v, want SERVING (or RESOURCE_EXHAUSTED until the server sees the end)", err)
		}
		if ctx.Err() != nil {
			t.Fatal("no watch accepted after one ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, stop := range stops {
		stop()
	}
}

// TestGRPCConnectionBounds: the server announces MaxStreamsPerConn in its
// HTTP/2 settings (a client past it waits for a stream to end, or opens
// another connection), and a client that floods it with pings is sent
// away (GOAWAY ENHANCE_YOUR_CALM).
func TestGRPCConnectionBounds(t *testing.T) {
	t.Parallel()
	f := newFace(t, basicYAML)
	g := f.NewGRPCServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var settings *http2.SettingsFrame
	for settings == nil {
		frame, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's settings: %v", err)
		}
		if s, ok := frame.(*http2.SettingsFrame); ok && !s.IsAck() {
			settings = s
		}
	}
	streams, announced := settings.Value(http2.SettingMaxConcurrentStreams)
	if !announced || streams != rls.MaxStreamsPerConn {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d (announced %v), want %d", streams, announced, rls.MaxStreamsPerConn)
	}
	if err := fr.WriteSettingsAck(); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			break // the server may have hung up already
		}
	}
	for {
		frame, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after a flood of pings: %v, want a GOAWAY first", err)
		}
		if ga, ok := frame.(*http2.GoAwayFrame); ok {
			if ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
				t.Errorf("GOAWAY %v (%q), want ENHANCE_YOUR_CALM", ga.ErrCode, ga.DebugData())
			}
			return
		}
		var ce http2.ConnectionError
		if errors.As(err, &ce) {
			t.Fatal(err)
		}
	}
}
