package redis

import (
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the layout blocks of lua/*.lua from codec.go")

// layoutBlock matches a script's layout block.
var layoutBlock = regexp.MustCompile(`(?s)-- layout: [^\n]*\n.*?-- end of layout\n`)

// TestLayout holds the Lua side to the layout codec.go declares: each
// script's layout block is the one Go generates (go test -run TestLayout
// -update rewrites them), the scripts index ARGV only through its
// names, read no name it lacks, and use every one; the Go side's
// indices fit the stride each kind of limit has.
func TestLayout(t *testing.T) {
	files := map[string][]layoutName{"prelude.lua": commonLayout}
	for name, sp := range specs {
		files[name+".lua"] = sp.layout
	}
	for file, names := range files {
		path := "lua/" + file
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := layoutLua(names)
		blocks := layoutBlock.FindAllString(string(src), -1)
		if len(blocks) != 1 {
			t.Errorf("%s: %d layout blocks, want 1", path, len(blocks))
			continue
		}
		if blocks[0] == want {
			continue
		}
		if *update {
			if err := os.WriteFile(path, []byte(strings.Replace(string(src), blocks[0], want, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s: layout block\n%s\nwant (go test -run TestLayout -update)\n%s", path, blocks[0], want)
	}
	if *update {
		t.Skip("rewrote the layout blocks: run again")
	}

	argv := regexp.MustCompile(`ARGV\[([^\]]*)\]`)
	argCall := regexp.MustCompile(`\b(?:arg|raw)\(([^,()]+), ([^)]+)\)`)
	ident := regexp.MustCompile(`\b[AL]_[A-Z_]+\b`)
	for name, sp := range specs {
		src := limiterSource(mustRead(name + ".lua"))
		code := stripComments(layoutBlock.ReplaceAllString(src, ""))
		declared := map[string]bool{}
		for _, n := range slices.Concat(commonLayout, sp.layout) {
			if declared[n.name] {
				t.Errorf("%s: %s declared twice", name, n.name)
			}
			declared[n.name] = true
		}
		for _, m := range argv.FindAllStringSubmatch(code, -1) {
			if !strings.Contains(m[1], "A_") {
				t.Errorf("%s: %s reads ARGV by a number, not a layout name", name, m[0])
			}
		}
		for _, m := range argCall.FindAllStringSubmatch(code, -1) {
			if m[2] != "k" && !strings.HasPrefix(m[2], "L_") {
				t.Errorf("%s: %s reads a limit's argument by a number, not a layout name", name, m[0])
			}
		}
		used := map[string]bool{}
		for _, id := range ident.FindAllString(code, -1) {
			used[id] = true
			if !declared[id] {
				t.Errorf("%s: the script reads %s, which codec.go does not declare", name, id)
			}
		}
		for id := range declared {
			if !used[id] {
				t.Errorf("%s: codec.go declares %s, which the script never reads", name, id)
			}
		}
	}

	// Go: each kind's arguments are distinct and fit its stride.
	fits := func(kind string, stride int, idx ...int) {
		t.Helper()
		seen := map[int]bool{}
		for _, i := range idx {
			if i < 1 || i > stride || seen[i] {
				t.Errorf("%s: argument %d out of 1..%d or repeated (%v)", kind, i, stride, idx)
			}
			seen[i] = true
		}
	}
	fits("header", argLimits, argMode, argAligned, argKinds, argFlags, argStride)
	fits("calendar", calLast, limCost, limLimit, calPrev, calCur, calNext, calEnd)
	fits("slot", slotLast, limCost, limLimit, slotLease, slotHolder, slotFirst, slotCount)
	for name, sp := range specs {
		idx := []int{limCost, limLimit}
		for _, n := range sp.layout {
			idx = append(idx, n.value)
		}
		if len(sp.layout) != sp.ruleArgs {
			t.Errorf("%s: %d layout names for %d rule arguments", name, len(sp.layout), sp.ruleArgs)
		}
		fits(name, limKind-1+sp.ruleArgs, idx...)
	}
}

// stripComments returns Lua source without its -- comments.
func stripComments(src string) string {
	var sb strings.Builder
	for line := range strings.Lines(src) {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i] + "\n"
		}
		sb.WriteString(line)
	}
	return sb.String()
}

func TestWindowMillis(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]int64{0: 1, 1: 1, 1e6: 1, 1e6 + 1: 2, 1.5e6: 2, 60e9: 60000} {
		if got := windowMillis(time.Duration(in)); got != want {
			t.Errorf("windowMillis(%dns) = %d, want %d", in, got, want)
		}
	}
}
