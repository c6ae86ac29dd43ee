// Command load is the token benchmark's client: -workers callers, each
// asking for a streamed chat completion of -want tokens again and again
// for -duration, round robin over the gateways, waiting a little after a
// 429. Two modes:
//
//   - proxy: through tollgate's proxy, which reserves at admission and
//     settles when the stream ends;
//   - after: as a gateway that charges after the fact does (Envoy AI
//     Gateway, and tollgate behind nginx with the application
//     reporting): ask tollgate's check listener, call the upstream
//     directly, then report the tokens the answer used on the admin
//     listener's spend call.
//
// It prints one JSON line: the mode, the streams completed, the 429s.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	mode := flag.String("mode", "proxy", "proxy or after")
	targets := flag.String("targets", "", "comma-separated base URLs: the proxies (proxy) or the check listeners (after)")
	admins := flag.String("admins", "", "after: comma-separated admin listener base URLs, one per target")
	token := flag.String("token", "", "after: the admin token")
	upstream := flag.String("upstream", "", "after: the upstream's base URL")
	workers := flag.Int("workers", 200, "concurrent callers")
	want := flag.Int64("want", 290, "max_tokens each request asks for")
	duration := flag.Duration("duration", 65*time.Second, "how long the callers call")
	tenant := flag.String("tenant", "acme", "the tenant (X-Tenant-ID)")
	flag.Parse()
	ts := strings.Split(*targets, ",")
	as := strings.Split(*admins, ",")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *workers, MaxConnsPerHost: 0}, Timeout: 60 * time.Second}
	body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"Say x many times."}],"stream":true,"max_tokens":%d}`, *want)
	var ok, denied, failed atomic.Int64
	deadline := time.Now().Add(*duration)
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(deadline); i++ {
				k := i % len(ts)
				var err error
				var got bool
				if *mode == "proxy" {
					got, err = viaProxy(client, ts[k], *tenant, body)
				} else {
					got, err = chargeAfter(client, ts[k], as[k%len(as)], *token, *upstream, *tenant, body)
				}
				switch {
				case err != nil:
					failed.Add(1)
					time.Sleep(50 * time.Millisecond)
				case got:
					ok.Add(1)
				default:
					denied.Add(1)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	json.NewEncoder(os.Stdout).Encode(map[string]any{"mode": *mode, "streams": ok.Load(), "denied": denied.Load(), "failed": failed.Load()})
}

// viaProxy streams one completion through a proxy: whether it was
// admitted.
func viaProxy(c *http.Client, base, tenant, body string) (bool, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant-ID", tenant)
	resp, err := c.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		_, _ = io.Copy(io.Discard, resp.Body)
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("proxy: %s", resp.Status)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err == nil, err
}

// chargeAfter checks, calls the upstream directly asking for usage, and
// reports what the answer used: whether it was admitted.
func chargeAfter(c *http.Client, check, admin, token, upstream, tenant, body string) (bool, error) {
	req, _ := http.NewRequest(http.MethodGet, check+"/", nil)
	req.Header.Set("X-Forwarded-Method", http.MethodPost)
	req.Header.Set("X-Forwarded-Uri", "/v1/chat/completions")
	req.Header.Set("X-Tenant-ID", tenant)
	resp, err := c.Do(req)
	if err != nil {
		return false, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("check: %s", resp.Status)
	}
	withUsage := strings.Replace(body, `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`, 1)
	resp, err = c.Post(upstream+"/v1/chat/completions", "application/json", strings.NewReader(withUsage))
	if err != nil {
		return false, err
	}
	used, err := lastUsage(resp.Body)
	resp.Body.Close()
	if err != nil {
		return false, err
	}
	spend, _ := http.NewRequest(http.MethodPost, admin+"/v1/tenants/"+tenant+"/spend",
		bytes.NewReader([]byte(fmt.Sprintf(`{"limit":"tpm","amount":%d}`, used))))
	spend.Header.Set("Authorization", "Bearer "+token)
	resp, err = c.Do(spend)
	if err != nil {
		return true, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return true, fmt.Errorf("spend: %s", resp.Status)
	}
	return true, nil
}

// lastUsage reads a stream and returns the total_tokens of the last
// event that carries a usage.
func lastUsage(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	var total int64
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Usage *struct {
				TotalTokens int64 `json:"total_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Usage != nil {
			total = ev.Usage.TotalTokens
		}
	}
	return total, sc.Err()
}

func init() { log.SetFlags(0) }
