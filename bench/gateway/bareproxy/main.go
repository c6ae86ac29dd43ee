// Command bareproxy is the baseline of the gateway benchmark
// (bench/gateway/run.sh): a bare httputil.ReverseProxy, what a Go team
// writes before it meters anything. Rewrite sets the upstream URL and
// the X-Forwarded-* headers and nothing else. With -idle 0 the Transport
// is http.DefaultTransport's (2 idle connections per host); with -idle N
// it keeps up to N idle connections to the upstream.
package main

import (
	"flag"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:20010", "address to listen on")
	upstream := flag.String("upstream", "http://127.0.0.1:20001", "upstream URL")
	idle := flag.Int("idle", 0, "Transport.MaxIdleConnsPerHost; 0 keeps http.DefaultTransport's")
	flag.Parse()

	target, err := url.Parse(*upstream)
	if err != nil {
		log.Fatalf("bareproxy: -upstream: %v", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if *idle > 0 {
		transport.MaxIdleConns = *idle
		transport.MaxIdleConnsPerHost = *idle
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
		},
		Transport: transport,
	}
	srv := &http.Server{Addr: *listen, Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
