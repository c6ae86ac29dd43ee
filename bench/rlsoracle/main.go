// Command rlsoracle sends the same sequences of Envoy ShouldRateLimit
// requests to a reference server (envoyproxy/ratelimit) and a server under
// test, and prints every difference between their answers. It exits 0 when
// they agree on every scenario, 1 on any difference, unmet expectation or
// scenario that straddled a window, and 2 on bad flags or files. See
// README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	a, b, config, scenarios, mode, only string
	timeout, margin                     time.Duration
	verbose, xds                        bool
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rlsoracle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.a, "a", "", "gRPC address of the reference, envoyproxy/ratelimit (host:port)")
	fs.StringVar(&o.b, "b", "", "gRPC address of the server under test (host:port)")
	fs.StringVar(&o.config, "config", "", "directory of the YAML both servers were started with")
	fs.StringVar(&o.scenarios, "scenarios", "", "scenario file (YAML or JSON)")
	fs.StringVar(&o.mode, "mode", "all", "which scenarios: all, default (count_denied: false), count-denied")
	fs.StringVar(&o.only, "run", "", "only scenarios whose name matches this regular expression")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Second, "deadline of one call")
	fs.DurationVar(&o.margin, "margin", 150*time.Millisecond, "least time left in every window when a scenario ends")
	fs.BoolVar(&o.verbose, "v", false, "print every answer")
	fs.BoolVar(&o.xds, "xds", false, "both servers took the configuration over xDS, which carries no share_threshold: compare the servers, not the expectations, in the scenarios counted under a share_threshold pattern")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.a == "" || o.b == "" || o.config == "" || o.scenarios == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "rlsoracle: -a, -b, -config and -scenarios are required")
		fs.Usage()
		return 2
	}
	if o.mode != "all" && o.mode != "default" && o.mode != "count-denied" {
		fmt.Fprintf(stderr, "rlsoracle: -mode %q: want all, default or count-denied\n", o.mode)
		return 2
	}
	only, err := regexp.Compile(o.only)
	if err != nil {
		fmt.Fprintf(stderr, "rlsoracle: -run: %v\n", err)
		return 2
	}
	cfg, err := rlsconf.LoadDir(o.config)
	if err != nil {
		fmt.Fprintf(stderr, "rlsoracle: -config: %v\n", err)
		return 2
	}
	data, err := os.ReadFile(o.scenarios)
	if err != nil {
		fmt.Fprintf(stderr, "rlsoracle: %v\n", err)
		return 2
	}
	file, err := ParseFile(data)
	if err != nil {
		fmt.Fprintf(stderr, "rlsoracle: %s: %v\n", o.scenarios, err)
		return 2
	}
	a, err := dial(o.a)
	if err != nil {
		fmt.Fprintf(stderr, "rlsoracle: -a: %v\n", err)
		return 2
	}
	defer a.Close()
	b, err := dial(o.b)
	if err != nil {
		fmt.Fprintf(stderr, "rlsoracle: -b: %v\n", err)
		return 2
	}
	defer b.Close()

	d := &driver{o: o, cfg: cfg, a: rlsv3.NewRateLimitServiceClient(a), b: rlsv3.NewRateLimitServiceClient(b),
		out: stdout, pair: 5 * time.Millisecond}
	if err := d.warmUp(); err != nil {
		fmt.Fprintf(stderr, "rlsoracle: %v\n", err)
		return 2
	}
	var ran, failed, unchecked int
	for _, s := range file.Scenarios {
		if !s.Selected(o.mode) || !only.MatchString(s.Name) {
			continue
		}
		d.expect = !(o.xds && sharesThreshold(cfg, s))
		if !d.expect {
			unchecked++
			fmt.Fprintf(stdout, "note %s: the servers compared, not its expectations (share_threshold, which xDS does not carry)\n", s.Name)
		}
		ran++
		if !d.scenario(s) {
			failed++
		}
	}
	fmt.Fprintf(stdout, "%d scenarios (%d without their expectations), %d requests to each server, %d failed (%s, mode %s)\n",
		ran, unchecked, d.requests, failed, o.scenarios, o.mode)
	if failed > 0 {
		return 1
	}
	return 0
}

// sharesThreshold reports whether a descriptor of s is counted under a
// share_threshold pattern of cfg: over xDS that flag does not exist, and
// the scenario's expectations (written for files) do not hold.
func sharesThreshold(cfg *rlsconf.Config, s Scenario) bool {
	for _, st := range s.Steps {
		req, _ := st.Request() // validated by ParseFile
		for _, d := range req.GetDescriptors() {
			var entries []rlsconf.Entry
			for _, e := range d.GetEntries() {
				entries = append(entries, rlsconf.Entry{Key: e.GetKey(), Value: e.GetValue()})
			}
			r, _ := cfg.Match(req.GetDomain(), entries)
			if r == nil {
				continue
			}
			for i, v := range r.KeyValues(entries) {
				if v != entries[i].Value {
					return true // counted under a shared pattern
				}
			}
		}
	}
	return false
}

func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// driver runs scenarios against both servers.
type driver struct {
	o        options
	cfg      *rlsconf.Config
	a, b     rlsv3.RateLimitServiceClient
	out      io.Writer
	pair     time.Duration // running mean of one request to both servers
	requests int
	// expect checks the reference's answers against the scenario's
	// expectations too (not where xDS cannot carry what they assume).
	expect bool
}

// scenario runs one scenario and reports whether both servers agreed and
// the reference met every expectation.
func (d *driver) scenario(s Scenario) bool {
	units := Units(s, d.cfg)
	n := 0
	for _, st := range s.Steps {
		n += st.Times()
	}
	need := time.Duration(n) * d.pair * 3 / 2
	wait, err := Wait(time.Now(), units, need, d.o.margin)
	if err != nil {
		fmt.Fprintf(d.out, "FAIL %s: %v\n", s.Name, err)
		return false
	}
	time.Sleep(wait)

	var problems []string
	start := time.Now()
	for i, st := range s.Steps {
		req, _ := st.Request() // validated by ParseFile
		for rep := range st.Times() {
			t0 := time.Now()
			a, b := d.call(d.a, req), d.call(d.b, req)
			d.pair = (d.pair*7 + time.Since(t0)) / 8
			d.requests++
			where := fmt.Sprintf("step %d rep %d", i, rep)
			if d.o.verbose {
				fmt.Fprintf(d.out, "     %s %s: a=%s b=%s\n", s.Name, where, show(a), show(b))
			}
			for _, diff := range Diff(a, b, st.ErrorText) {
				problems = append(problems, where+": "+diff)
			}
			if d.expect && rep == st.Times()-1 {
				for _, u := range st.Expect.Unmet(a) {
					problems = append(problems, where+": reference: "+u)
				}
			}
		}
	}
	if u := Straddled(start, time.Now(), units); u != 0 {
		problems = append(problems, fmt.Sprintf("ran across the end of a %d s window (waited %v first): counts are not comparable; rerun", u, wait.Round(time.Millisecond)))
	}
	if len(problems) == 0 {
		fmt.Fprintf(d.out, "ok   %s (%d requests, windows %v s, waited %v)\n", s.Name, n, units, wait.Round(time.Millisecond))
		return true
	}
	fmt.Fprintf(d.out, "FAIL %s\n", s.Name)
	for _, p := range problems {
		fmt.Fprintf(d.out, "     %s\n", p)
	}
	return false
}

// warmUpDomain is a domain no suite configures: a request to it counts
// nothing anywhere.
const warmUpDomain = "rlsoracle-warm-up"

// warmUp opens both connections with a request that counts nothing, so
// that the first scenario's timing holds no connection set-up, and seeds
// the estimate of a request's round trip.
func (d *driver) warmUp() error {
	req := &rlsv3.RateLimitRequest{Domain: warmUpDomain, Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}}
	for range 3 {
		t0 := time.Now()
		for name, c := range map[string]rlsv3.RateLimitServiceClient{"-a": d.a, "-b": d.b} {
			if ans := d.call(c, req); ans.Err != nil {
				return fmt.Errorf("%s does not answer: %s", name, errString(ans.Err))
			}
		}
		d.pair = time.Since(t0)
	}
	return nil
}

func (d *driver) call(c rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest) Answer {
	ctx, cancel := context.WithTimeout(context.Background(), d.o.timeout)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, req)
	return Answer{Resp: resp, Err: err}
}

// show renders an answer on one line for -v.
func show(a Answer) string {
	if a.Err != nil {
		return errString(a.Err)
	}
	s := a.Resp.GetOverallCode().String()
	for _, st := range a.Resp.GetStatuses() {
		s += fmt.Sprintf(" [%v %s rem=%d reset=%ds]", st.GetCode(), limitString(st.GetCurrentLimit()),
			st.GetLimitRemaining(), st.GetDurationUntilReset().GetSeconds())
	}
	return s
}
