// Command report turns the output of BenchmarkRedis (several rounds of
// `go test -bench Redis -count 1`, appended to one file) and of the wrk
// runs into the README's tables and gnuplot's data: medians over the
// rounds, ratios within the run.
//
//	go run ./report -bench redis.txt -wrk wrk.txt -dat redis.dat > table.md
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// a line such as
// BenchmarkRedis/g=64/impl=ulule-limiter-2  40096  25468 ns/op  39265 decisions/s  0 errors/op  1354 p50-µs  9528 p99-µs  935 B/op  21 allocs/op
var lineRE = regexp.MustCompile(`^BenchmarkRedis/g=(\d+)/impl=(\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

type key struct {
	g    int
	impl string
}

func main() {
	benchFile := flag.String("bench", "", "BenchmarkRedis output, all rounds")
	wrkFile := flag.String("wrk", "", "wrk summary lines: `<store> <requests/s> <p99 ms>`, one per run")
	datFile := flag.String("dat", "", "write gnuplot data here: goroutines, then decisions/s per impl")
	flag.Parse()
	if err := run(*benchFile, *wrkFile, *datFile, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(benchFile, wrkFile, datFile string, out io.Writer) error {
	f, err := os.Open(benchFile)
	if err != nil {
		return err
	}
	defer f.Close()
	metrics := map[key]map[string][]float64{}
	var impls []string
	var gs []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		g, _ := strconv.Atoi(m[1])
		k := key{g, m[2]}
		if metrics[k] == nil {
			metrics[k] = map[string][]float64{}
		}
		if !slices.Contains(impls, k.impl) {
			impls = append(impls, k.impl)
		}
		if !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
		fields := strings.Fields(m[3])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err == nil {
				metrics[k][fields[i+1]] = append(metrics[k][fields[i+1]], v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	sort.Ints(gs)
	med := func(k key, unit string) float64 { return median(metrics[k][unit]) }

	rounds := 0
	for _, m := range metrics {
		rounds = max(rounds, len(m["decisions/s"]))
	}
	fmt.Fprintf(out, "Medians of %d interleaved rounds; ratios are of medians within this run.\n\n", rounds)
	fmt.Fprintln(out, "| goroutines | limiter | decisions/s | p50 | p99 | errors/op | allocs/op | vs the faster peer |")
	fmt.Fprintln(out, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, g := range gs {
		peer := max(med(key{g, "ulule-limiter"}, "decisions/s"), med(key{g, "redis_rate"}, "decisions/s"))
		for _, impl := range impls {
			k := key{g, impl}
			if metrics[k] == nil {
				continue
			}
			d := med(k, "decisions/s")
			ratio := ""
			if peer > 0 && strings.HasPrefix(impl, "tollgate") {
				ratio = fmt.Sprintf("**%.2f×**", d/peer)
			}
			fmt.Fprintf(out, "| %d | %s | %s | %s | %s | %.4f | %.0f | %s |\n", g, impl, kilo(d),
				micros(med(k, "p50-µs")), micros(med(k, "p99-µs")), med(k, "errors/op"), med(k, "allocs/op"), ratio)
		}
	}
	if incr := med(key{1, "go-redis-incr"}, "ns/op"); incr > 0 {
		fw := med(key{1, "tollgate-fixed_window"}, "ns/op")
		fmt.Fprintf(out, "\nOne goroutine: tollgate fixed window %.1f µs per decision against a bare go-redis INCR round trip %.1f µs: **%.2f×**.\n",
			fw/1e3, incr/1e3, fw/incr)
	}

	if datFile != "" {
		var b strings.Builder
		fmt.Fprintf(&b, "goroutines")
		for _, impl := range impls {
			fmt.Fprintf(&b, " %s", impl)
		}
		b.WriteString("\n")
		for _, g := range gs {
			fmt.Fprintf(&b, "%d", g)
			for _, impl := range impls {
				fmt.Fprintf(&b, " %.0f", med(key{g, impl}, "decisions/s"))
			}
			b.WriteString("\n")
		}
		if err := os.WriteFile(datFile, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}

	if wrkFile != "" {
		return wrkTable(wrkFile, out)
	}
	return nil
}

// wrkTable reports the median requests/s and p99 per store, and the
// Redis store's ratio to memory's.
func wrkTable(file string, out io.Writer) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	rps, p99 := map[string][]float64{}, map[string][]float64{}
	var stores []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		r, err1 := strconv.ParseFloat(f[1], 64)
		p, err2 := strconv.ParseFloat(f[2], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if !slices.Contains(stores, f[0]) {
			stores = append(stores, f[0])
		}
		rps[f[0]] = append(rps[f[0]], r)
		p99[f[0]] = append(p99[f[0]], p)
	}
	fmt.Fprintf(out, "\n| gateway store (wrk, medians of %d runs) | requests/s | p99 |\n| --- | ---: | ---: |\n", len(rps["memory"]))
	for _, s := range stores {
		fmt.Fprintf(out, "| %s | %s | %.2f ms |\n", s, kilo(median(rps[s])), median(p99[s]))
	}
	if m := median(rps["memory"]); m > 0 {
		fmt.Fprintf(out, "\nRedis store / memory store: **%.2f×** requests/s.\n", median(rps["redis"])/m)
	}
	return nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func kilo(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.1f k", v/1000)
	}
	return fmt.Sprintf("%.0f", v)
}

func micros(us float64) string {
	if us >= 1000 {
		return fmt.Sprintf("%.2f ms", us/1000)
	}
	return fmt.Sprintf("%.0f µs", us)
}
