// Command report turns the rate limit service benchmark's raw rounds
// (bench/rls/run.sh: one JSON line per run) into the table of medians in
// docs/rls-bench.md and the data of its plot.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
)

// run is one line of the raw rounds (bench/rls/load's output).
type run struct {
	Round         int                `json:"round"`
	Target        string             `json:"target"`
	Callers       int                `json:"callers"`
	Flood         bool               `json:"flood"`
	PerSecond     float64            `json:"per_second"`
	P50us         float64            `json:"p50_us"`
	P99us         float64            `json:"p99_us"`
	Over          int64              `json:"over_limit"`
	Decisions     int64              `json:"decisions"`
	Errors        int64              `json:"errors"`
	CPUus         map[string]float64 `json:"cpu_us"`
	RedisCommands float64            `json:"redis_commands"`
}

// key is one cell of the table.
type key struct {
	target  string
	callers int
	flood   bool
}

// targets in the table's order.
var targets = []string{"stub", "envoy-ratelimit", "tollgate"}

func main() {
	in := flag.String("in", "docs/rls-bench.jsonl", "the raw rounds")
	md := flag.String("md", "docs/rls-bench.md", "the table to write")
	plot := flag.String("plotdata", "", "where to write the plot's data")
	machine := flag.String("machine", "", "a line about the machine, for the table")
	flag.Parse()
	runs, err := read(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	cells := map[key][]run{}
	var levels []int
	rounds := 0
	for _, r := range runs {
		k := key{r.Target, r.Callers, r.Flood}
		cells[k] = append(cells[k], r)
		if !r.Flood && !slices.Contains(levels, r.Callers) {
			levels = append(levels, r.Callers)
		}
		rounds = max(rounds, r.Round)
	}
	slices.Sort(levels)
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- written by bench/rls/report from %s: do not edit -->\n\n", *in)
	fmt.Fprintf(&b, "Medians of %d interleaved rounds; %s.\n\n", rounds, *machine)
	b.WriteString("The ratios to envoyproxy/ratelimit are medians over the rounds of each round's own ratio\n" +
		"(the runs of one round are minutes apart at most, so a machine whose load drifts skews them less\n" +
		"than a ratio of medians would).\n\n")
	b.WriteString("| callers | server | decisions/s | × envoyproxy/ratelimit | p50 ms | p99 ms | p99 ÷ envoyproxy/ratelimit's | server CPU µs/decision | Redis CPU µs/decision | client CPU µs/decision | Redis commands/decision |\n")
	b.WriteString("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	var dat strings.Builder
	dat.WriteString("# callers")
	for _, t := range targets {
		dat.WriteString(" " + t + "/s")
	}
	for _, t := range targets {
		dat.WriteString(" " + t + "-p99ms")
	}
	dat.WriteString("\n")
	for _, c := range levels {
		ref := cells[key{"envoy-ratelimit", c, false}]
		fmt.Fprintf(&dat, "%d", c)
		var p99s []string
		for _, t := range targets {
			rs := cells[key{t, c, false}]
			if len(rs) == 0 {
				dat.WriteString(" -")
				p99s = append(p99s, "-")
				continue
			}
			rate, tail := median(rs, perSecond), median(rs, p99)
			fmt.Fprintf(&dat, " %.0f", rate)
			p99s = append(p99s, fmt.Sprintf("%.2f", tail/1000))
			fmt.Fprintf(&b, "| %d | %s | %.0f | %s | %.2f | %.2f | %s | %.1f | %.1f | %s | %.2f |\n", c, t, rate,
				paired(rs, ref, perSecond), median(rs, p50)/1000, tail/1000, paired(rs, ref, p99),
				median(rs, cpu("server")), median(rs, cpu("redis")), orDash(rs, "client"), median(rs, redisCommands))
		}
		dat.WriteString(" " + strings.Join(p99s, " ") + "\n")
	}
	b.WriteString("\nDenied flood (64 callers, one value over its limit: every call denied):\n\n")
	b.WriteString("| server | denials/s | p99 ms | server CPU µs/denial | Redis commands per denial |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: |\n")
	for _, t := range targets {
		rs := cells[key{t, 64, true}]
		if len(rs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.2f | %.1f | %.3f |\n", t, median(rs, perSecond), median(rs, p99)/1000,
			median(rs, cpu("server")), median(rs, redisCommands))
	}
	var errs int64
	for _, r := range runs {
		errs += r.Errors
	}
	fmt.Fprintf(&b, "\nCalls that failed (gRPC errors), over every run: %d.\n", errs)
	if err := os.WriteFile(*md, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	if *plot != "" {
		if err := os.WriteFile(*plot, []byte(dat.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
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
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r run
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		runs = append(runs, r)
	}
	return runs, sc.Err()
}

// orDash returns the median CPU of name over rs, or "-" when no run
// measured it (older runs did not measure the client).
func orDash(rs []run, name string) string {
	for _, r := range rs {
		if _, ok := r.CPUus[name]; ok {
			return fmt.Sprintf("%.1f", median(rs, cpu(name)))
		}
	}
	return "-"
}

func perSecond(r run) float64     { return r.PerSecond }
func p50(r run) float64           { return r.P50us }
func p99(r run) float64           { return r.P99us }
func redisCommands(r run) float64 { return r.RedisCommands }
func cpu(name string) func(run) float64 {
	return func(r run) float64 { return r.CPUus[name] }
}

// median returns the median of f over rs (the mean of the middle two
// for an even count).
func median(rs []run, f func(run) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// paired returns the median over rounds of f(rs' run) / f(ref's run) in
// the same round, or "-" without a round in common.
func paired(rs, ref []run, f func(run) float64) string {
	byRound := map[int]run{}
	for _, r := range ref {
		byRound[r.Round] = r
	}
	var ratios []run
	for _, r := range rs {
		if o, ok := byRound[r.Round]; ok && f(o) > 0 {
			ratios = append(ratios, run{PerSecond: f(r) / f(o)})
		}
	}
	if len(ratios) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", median(ratios, perSecond))
}
