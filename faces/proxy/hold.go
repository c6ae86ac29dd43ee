package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/tollgate/faces/httpface"
)

// DefaultDrainTimeout is [UpstreamOptions.DrainTimeout]'s default.
const DefaultDrainTimeout = 30 * time.Second

// holding is the transport of [NewUpstream]: a request that holds
// concurrency slots keeps them until the upstream's exchange is over, as
// nginx's proxy_ignore_client_abort does, because many upstreams work on
// after their client's connection closed (gunicorn's sync workers,
// PHP-FPM, handlers that never read their context) and a slot freed
// earlier lets more requests run there than the limit allows. So for
// such a request neither the client going away nor the upstream timeout
// aborts the round trip: the answer is read to its end and discarded.
// What bounds it is the drain: once the client has gone, the upstream's
// body has been given up on, or the client was answered 504, the
// exchange has drain more to end, then its connection is closed (the
// slot comes back when the handler returns).
//
// Requests without slots, and protocol upgrades, go through plain as
// ReverseProxy sends them: aborted with their client, and answered 504
// when the headers take longer than the timeout.
type holding struct {
	plain   http.RoundTripper // its response header timeout is timeout
	held    http.RoundTripper // without a response header timeout
	timeout time.Duration     // the wait for response headers; 0: none
	drain   time.Duration
}

// roundTrip is a round trip's result.
type roundTrip struct {
	resp *http.Response
	err  error
}

func (h *holding) RoundTrip(req *http.Request) (*http.Response, error) {
	client := req.Context()
	if !holdsSlots(client) || req.Header.Get("Upgrade") != "" {
		resp, err := h.plain.RoundTrip(req)
		if err == nil {
			meterAnswer(req, resp)
		}
		return resp, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(client))
	ex := &exchange{cancel: cancel, drain: h.drain}
	ex.unwatch = context.AfterFunc(client, ex.abandon)
	var wrote chan struct{} // closed when the request has been written
	if h.timeout > 0 {
		wrote = make(chan struct{})
		var once sync.Once
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(wrote) }) },
		})
	}
	done := make(chan roundTrip, 1)
	out := req.WithContext(ctx)
	go func() {
		resp, err := h.held.RoundTrip(out)
		if err == nil {
			// Metered here, so that an answer read to its end after
			// its client went is metered too.
			meterAnswer(out, resp)
		}
		done <- roundTrip{resp, err}
	}()
	var timedOut <-chan time.Time
	for {
		select {
		case rt := <-done:
			return ex.answer(rt, client)
		case <-wrote:
			// The header wait starts once the request is written, as
			// http.Transport's ResponseHeaderTimeout does.
			wrote = nil
			t := time.NewTimer(h.timeout)
			defer t.Stop()
			timedOut = t.C
		case <-timedOut:
			ex.abandon()
			return nil, &heldTimeout{timeout: h.timeout, done: done, ex: ex}
		}
	}
}

// exchange is one held request's exchange with the upstream, and its
// drain bound.
type exchange struct {
	cancel  context.CancelFunc // ends the exchange: its connection is closed
	unwatch func() bool        // stops abandoning it when the client goes
	drain   time.Duration
	once    sync.Once
	timer   *time.Timer // the drain bound's; set by abandon, under once
	mu      sync.Mutex  // guards timer's reading against abandon
}

// abandon starts the drain bound, once: nobody waits for the answer any
// more, and the exchange has drain left to end.
func (e *exchange) abandon() {
	e.once.Do(func() {
		e.mu.Lock()
		e.timer = time.AfterFunc(e.drain, e.cancel)
		e.mu.Unlock()
	})
}

// end releases what the exchange holds; its answer has been read.
func (e *exchange) end() {
	e.unwatch()
	e.mu.Lock()
	if e.timer != nil {
		e.timer.Stop()
	}
	e.mu.Unlock()
	e.cancel()
}

// answer returns rt for ReverseProxy: an error as it is, a response with
// its body drained on close, or, when the client has gone meanwhile, the
// client's error once the answer has been read and discarded.
func (e *exchange) answer(rt roundTrip, client context.Context) (*http.Response, error) {
	if rt.err != nil {
		e.end()
		return nil, rt.err
	}
	if err := client.Err(); err != nil {
		e.discard(rt.resp)
		return nil, err
	}
	rt.resp.Body = &heldBody{ReadCloser: rt.resp.Body, ex: e}
	return rt.resp, nil
}

// discard reads resp's body to its end (or the drain bound) and ends
// the exchange.
func (e *exchange) discard(resp *http.Response) {
	e.abandon()
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	e.end()
}

// heldBody is a held request's response body: closed before its end (the
// client gone, a write failed), it is read to its end first, within the
// drain bound, so that the upstream's exchange is over when Close returns.
type heldBody struct {
	io.ReadCloser
	ex  *exchange
	eof bool
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *heldBody) Close() error {
	if !b.eof {
		b.ex.abandon()
		_, _ = io.Copy(io.Discard, b.ReadCloser)
	}
	err := b.ReadCloser.Close()
	b.ex.end()
	return err
}

// heldTimeout is the error of a held request whose response headers did
// not come within the upstream timeout: the client is answered 504, and
// the exchange goes on (within the drain bound) until wait.
type heldTimeout struct {
	timeout time.Duration
	done    <-chan roundTrip
	ex      *exchange
}

func (e *heldTimeout) Error() string {
	return fmt.Sprintf("no response headers within %v; the exchange goes on, held, for at most the drain bound", e.timeout)
}

// Unwrap makes it a timeout for isTimeout (504).
func (e *heldTimeout) Unwrap() error { return context.DeadlineExceeded }

// wait waits for the exchange's end, its answer discarded.
func (e *heldTimeout) wait() {
	if rt := <-e.done; rt.err == nil {
		e.ex.discard(rt.resp)
		return
	}
	e.ex.end()
}

// writeHeld writes the answer that write makes (an error's) to w whole
// and at once, with its length (and "Connection: close" on HTTP/1, whose
// connection serves nothing else until the handler returns), so that the
// client has it all, and goes elsewhere for its next request, while the
// handler waits for the upstream.
func writeHeld(w http.ResponseWriter, r *http.Request, write func(http.ResponseWriter)) {
	b := &bufferedAnswer{ResponseWriter: w, code: http.StatusOK}
	write(b)
	h := w.Header()
	h.Set("Content-Length", strconv.Itoa(b.body.Len()))
	if r.ProtoMajor == 1 {
		h.Set("Connection", "close")
	}
	w.WriteHeader(b.code)
	_, _ = w.Write(b.body.Bytes())
	_ = httpface.Flush(w)
}

// bufferedAnswer keeps the status and body written to it.
type bufferedAnswer struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
}

func (b *bufferedAnswer) WriteHeader(code int)        { b.code = code }
func (b *bufferedAnswer) Write(p []byte) (int, error) { return b.body.Write(p) }

// asHeldTimeout returns err as a *heldTimeout, or nil.
func asHeldTimeout(err error) *heldTimeout {
	var ht *heldTimeout
	if errors.As(err, &ht) {
		return ht
	}
	return nil
}
