// Command report turns the raw rounds of the gateway benchmark
// (bench/gateway/run.sh) into a markdown table of medians, with ratios to
// the bare httputil.ReverseProxy and to nginx limit_req, and a data file
// for bench/gateway/plot.gp.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
)

// A row of the raw table: one wrk run.
type run struct {
	target, shape         string
	rps, p50, p99         float64 // req/s; latencies in µs
	requests, non2xx, err int64
	held, opened          float64 // upstream connections: open mid-run, opened during the run
}

var shapes = []struct{ name, title string }{
	{"c64", "Within budget, `wrk -t2 -c64`, 1000 tenants"},
	{"c256", "Within budget, `wrk -t2 -c256`, 1000 tenants"},
	{"flood", "Denied flood, `wrk -t2 -c64`, one tenant over its budget (429s)"},
}

// labels name the targets in the table and the plot, in the order shown.
var labels = []struct{ target, label string }{
	{"bare", "bare `httputil.ReverseProxy` (default Transport)"},
	{"bare-tuned", "bare `httputil.ReverseProxy` (1024 idle conns/host)"},
	{"tollgate-baseline", "tollgate before, memory store (BASELINE_REV)"},
	{"tollgate-memory", "tollgate, memory store"},
	{"tollgate-redis-fw", "tollgate, Redis fixed window"},
	{"tollgate-redis-tb", "tollgate, Redis token bucket"},
	{"nginx", "nginx `limit_req`"},
	{"haproxy", "HAProxy stick table"},
}

func main() {
	raw := flag.String("raw", "docs/gateway-bench.tsv", "raw rounds, from run.sh")
	md := flag.String("md", "docs/gateway-bench.md", "markdown table to write")
	dat := flag.String("dat", "", "gnuplot data file to write (optional)")
	meta := flag.String("meta", "", "one line saying when and how it was measured")
	flag.Parse()

	runs, err := read(*raw)
	if err != nil {
		log.Fatalf("report: %v", err)
	}
	var b strings.Builder
	writeTables(&b, runs, *meta)
	if err := os.WriteFile(*md, []byte(b.String()), 0o644); err != nil {
		log.Fatalf("report: %v", err)
	}
	if *dat != "" {
		var d strings.Builder
		writePlotData(&d, runs)
		if err := os.WriteFile(*dat, []byte(d.String()), 0o644); err != nil {
			log.Fatalf("report: %v", err)
		}
	}
}

func read(path string) ([]run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var runs []run
	s := bufio.NewScanner(f)
	for line := 0; s.Scan(); line++ {
		if line == 0 {
			continue // header
		}
		c := strings.Split(s.Text(), "\t")
		if len(c) != 11 {
			return nil, fmt.Errorf("%s:%d: %d columns, want 11", path, line+1, len(c))
		}
		num := func(i int) float64 {
			v, perr := strconv.ParseFloat(c[i], 64)
			if perr != nil && err == nil {
				err = fmt.Errorf("%s:%d: column %d: %w", path, line+1, i+1, perr)
			}
			return v
		}
		r := run{target: c[1], shape: c[2], rps: num(3), p50: num(4), p99: num(5),
			requests: int64(num(6)), non2xx: int64(num(7)), err: int64(num(8)), held: num(9), opened: num(10)}
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, s.Err()
}

// stats are the medians of one (target, shape).
type stats struct {
	n                           int
	rps, p50, p99, held, opened float64
	non2xxShare, errorShare     float64 // of all requests, over all rounds
}

func summarize(runs []run, target, shape string) (stats, bool) {
	var rps, p50, p99, held, opened []float64
	var req, non2xx, errs int64
	for _, r := range runs {
		if r.target != target || r.shape != shape {
			continue
		}
		rps, p50, p99 = append(rps, r.rps), append(p50, r.p50), append(p99, r.p99)
		held, opened = append(held, r.held), append(opened, r.opened)
		req, non2xx, errs = req+r.requests, non2xx+r.non2xx, errs+r.err
	}
	if len(rps) == 0 {
		return stats{}, false
	}
	return stats{n: len(rps), rps: median(rps), p50: median(p50), p99: median(p99), held: median(held), opened: median(opened),
		non2xxShare: float64(non2xx) / float64(max(req, 1)), errorShare: float64(errs) / float64(max(req, 1))}, true
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func writeTables(w io.Writer, runs []run, meta string) {
	if meta != "" {
		fmt.Fprintf(w, "Measured %s; medians of the rounds. Ratios are of medians in the same run. "+
			"Upstream connections: opened during a run (the upstream's accepted count), and held open mid-run by the target (idle ones of earlier runs included).\n\n", meta)
	}
	for _, sh := range shapes {
		bare, haveBare := summarize(runs, "bare", sh.name)
		ngx, haveNginx := summarize(runs, "nginx", sh.name)
		fmt.Fprintf(w, "%s:\n\n", sh.title)
		fmt.Fprintln(w, "| | req/s | vs bare proxy | vs nginx | p50 | p99 | p99 vs nginx | upstream conns opened (held) | non-2xx |")
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
		for _, l := range labels {
			s, ok := summarize(runs, l.target, sh.name)
			if !ok {
				continue
			}
			vsBare, vsNginx, p99Nginx := "", "", ""
			if haveBare && sh.name != "flood" {
				vsBare = fmt.Sprintf("%.2f×", s.rps/bare.rps)
			}
			if haveNginx {
				vsNginx = fmt.Sprintf("%.2f×", s.rps/ngx.rps)
				p99Nginx = fmt.Sprintf("%.2f×", s.p99/ngx.p99)
			}
			name := l.label
			if strings.HasPrefix(l.target, "tollgate") {
				name = "**" + name + "**"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %.0f (%.0f) | %s |\n", name, thousands(s.rps), vsBare, vsNginx,
				ms(s.p50), ms(s.p99), p99Nginx, s.opened, s.held, share(s.non2xxShare, s.errorShare))
		}
		fmt.Fprintln(w)
	}
}

func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}

func ms(us float64) string { return fmt.Sprintf("%.2f ms", us/1000) }

func share(non2xx, errs float64) string {
	s := fmt.Sprintf("%.1f%%", 100*non2xx)
	if errs > 0 {
		s += fmt.Sprintf(" (+%.2f%% socket errors)", 100*errs)
	}
	return s
}

// writePlotData writes one line per target: its short name, then the
// median req/s and p99 (ms) of each shape, "-" where it was not run.
func writePlotData(w io.Writer, runs []run) {
	fmt.Fprintln(w, "# target c64_rps c256_rps flood_rps c64_p99_ms c256_p99_ms flood_p99_ms")
	for _, l := range labels {
		var rps, p99 []string
		any := false
		for _, sh := range shapes {
			s, ok := summarize(runs, l.target, sh.name)
			if !ok {
				rps, p99 = append(rps, "-"), append(p99, "-")
				continue
			}
			any = true
			rps, p99 = append(rps, fmt.Sprintf("%.0f", s.rps)), append(p99, fmt.Sprintf("%.3f", s.p99/1000))
		}
		if any {
			fmt.Fprintf(w, "%q %s %s\n", l.target, strings.Join(rps, " "), strings.Join(p99, " "))
		}
	}
}
