package topk_test

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"

	"github.com/tollgate/tollgate/internal/topk"
)

func TestSketchSteps(t *testing.T) {
	t.Parallel()
	s := topk.New(2)
	steps := []struct {
		add  string
		want []topk.Counter
	}{
		{"a", []topk.Counter{{Item: "a", Count: 1}}},
		{"a", []topk.Counter{{Item: "a", Count: 2}}},
		{"b", []topk.Counter{{Item: "a", Count: 2}, {Item: "b", Count: 1}}},
		// Full: c takes b's place, and b's count as its error.
		{"c", []topk.Counter{{Item: "a", Count: 2}, {Item: "c", Count: 2, Err: 1}}},
		{"c", []topk.Counter{{Item: "c", Count: 3, Err: 1}, {Item: "a", Count: 2}}},
		{"d", []topk.Counter{{Item: "c", Count: 3, Err: 1}, {Item: "d", Count: 3, Err: 2}}},
	}
	for i, st := range steps {
		s.Add(key(st.add), st.add, 1)
		got := s.Summary()
		if fmt.Sprint(got.Counters) != fmt.Sprint(st.want) {
			t.Fatalf("step %d: Add(%q): counters %v, want %v", i, st.add, got.Counters, st.want)
		}
		if got.N != int64(i+1) {
			t.Fatalf("step %d: N = %d, want %d", i, got.N, i+1)
		}
	}
	if got, want := s.Summary().Floor, int64(3); got != want {
		t.Errorf("Floor = %d, want %d (the smallest count of a full sketch)", got, want)
	}
	if !s.Touch(key("d")) || s.Touch(key("a")) {
		t.Errorf("Touch: want d monitored and a not")
	}
	if got := s.Summary().Counters[1]; got.Item != "d" || got.Allowed != 1 {
		t.Errorf("after Touch(d): %+v, want d with Allowed 1", got)
	}
	s.Reset()
	if got := s.Summary(); len(got.Counters) != 0 || got.N != 0 || got.Floor != 0 {
		t.Errorf("after Reset: %+v, want empty", got)
	}
}

// stream returns a shuffled stream: heavy items, each given its count,
// among distinct light items, each seen once or twice.
func stream(r *rand.Rand, heavy map[string]int, light int) ([]string, map[string]int) {
	truth := map[string]int{}
	var out []string
	for item, n := range heavy {
		for range n {
			out = append(out, item)
		}
		truth[item] = n
	}
	for i := range light {
		item := fmt.Sprintf("light-%d", i)
		n := 1 + r.IntN(2)
		for range n {
			out = append(out, item)
		}
		truth[item] = n
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out, truth
}

// TestNeverMissesAHeavyItem holds the sketch to its guarantee on many
// random streams: every item seen more than N/m times is monitored, and
// every monitored item's true count is within [Count−Err, Count].
func TestNeverMissesAHeavyItem(t *testing.T) {
	t.Parallel()
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 1))
		m := 1 + r.IntN(30)
		heavy := map[string]int{}
		for i := range 1 + r.IntN(m) {
			heavy[fmt.Sprintf("heavy-%d", i)] = 1 + r.IntN(400)
		}
		items, truth := stream(r, heavy, r.IntN(3000))
		s := topk.New(m)
		for _, it := range items {
			s.Add(key(it), it, 1)
		}
		sum := s.Summary()
		if sum.N != int64(len(items)) {
			t.Fatalf("seed %d: N = %d, want %d", seed, sum.N, len(items))
		}
		held := map[string]topk.Counter{}
		for _, c := range sum.Counters {
			held[c.Item] = c
			if f := int64(truth[c.Item]); c.Count-c.Err > f || f > c.Count {
				t.Fatalf("seed %d m=%d: %s counted %d err %d, true %d: outside [Count-Err, Count]", seed, m, c.Item, c.Count, c.Err, f)
			}
		}
		for item, f := range truth {
			if int64(f)*int64(m) > sum.N {
				if _, ok := held[item]; !ok {
					t.Fatalf("seed %d m=%d: %s seen %d of %d times (more than 1/m) is not monitored", seed, m, item, f, sum.N)
				}
			} else if f > int(sum.Floor) {
				if _, ok := held[item]; !ok {
					t.Fatalf("seed %d: %s seen %d times, above the floor %d, is not monitored", seed, item, f, sum.Floor)
				}
			}
		}
	}
}

// TestMergeBounds splits streams over several sketches (replicas,
// minutes), truncates some summaries as a replica publishes them, and
// holds Merge to its bounds: every item seen more than N/m times in all
// is found, and each estimate brackets the true count.
func TestMergeBounds(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 2))
		m := 2 + r.IntN(20)
		heavy := map[string]int{}
		for i := range 1 + r.IntN(m) {
			heavy[fmt.Sprintf("heavy-%d", i)] = 1 + r.IntN(600)
		}
		items, truth := stream(r, heavy, r.IntN(4000))
		parts := 1 + r.IntN(6)
		sketches := make([]*topk.Sketch, parts)
		for i := range sketches {
			sketches[i] = topk.New(m + r.IntN(m))
		}
		for _, it := range items {
			sketches[r.IntN(parts)].Add(key(it), it, 1)
		}
		sums := make([]topk.Summary, parts)
		var n int64
		for i, s := range sketches {
			sums[i] = s.Summary()
			if r.IntN(2) == 0 {
				sums[i] = sums[i].Truncate(m)
			}
			n += sums[i].N
		}
		est := topk.Merge(sums, 1<<30)
		found := map[string]topk.Estimate{}
		for _, e := range est {
			found[e.Item] = e
			if f := int64(truth[e.Item]); e.Lower > f || f > e.Upper {
				t.Fatalf("seed %d: %s estimated [%d, %d], true %d", seed, e.Item, e.Lower, e.Upper, f)
			}
		}
		for item, f := range truth {
			if int64(f)*int64(m) > n {
				if _, ok := found[item]; !ok {
					t.Fatalf("seed %d m=%d: %s seen %d of %d times is missing from the merge", seed, m, item, f, n)
				}
			}
		}
	}
}

func TestTruncateKeepsTheMost(t *testing.T) {
	t.Parallel()
	s := topk.Summary{Counters: []topk.Counter{{Item: "c", Count: 1}, {Item: "a", Count: 9}, {Item: "b", Count: 5}}, N: 15}
	got := s.Truncate(2)
	if len(got.Counters) != 2 || got.Counters[0].Item != "a" || got.Counters[1].Item != "b" || got.Floor != 1 || got.N != 15 {
		t.Errorf("Truncate(2) = %+v, want a, b, floor 1, N 15", got)
	}
	if got := s.Truncate(3); len(got.Counters) != 3 || got.Floor != 0 {
		t.Errorf("Truncate(3) = %+v, want it whole", got)
	}
}

// TestFixedMemory adds a million distinct items: the sketch allocates
// nothing once full, whatever the number of items.
func TestFixedMemory(t *testing.T) {
	s := topk.New(20)
	items := make([]string, 1<<12)
	for i := range items {
		items[i] = fmt.Sprintf("tenant-%d", i)
	}
	keys := make([]uint64, len(items))
	for i, it := range items {
		keys[i] = key(it)
	}
	for i, it := range items[:100] {
		s.Add(keys[i], it, 1)
	}
	i := 0
	allocs := testing.AllocsPerRun(1_000_000, func() {
		s.Add(keys[i%len(items)], items[i%len(items)], 1)
		i++
	})
	if allocs != 0 {
		t.Errorf("Add on a full sketch: %v allocations, want 0", allocs)
	}
	if got := len(s.Summary().Counters); got != 20 {
		t.Errorf("%d counters, want 20", got)
	}
}

func BenchmarkAdd(b *testing.B) {
	s := topk.New(20)
	items := make([]string, 1<<16)
	for i := range items {
		items[i] = fmt.Sprintf("tenant-%d", i)
	}
	keys := make([]uint64, len(items))
	for i, it := range items {
		keys[i] = key(it)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Add(keys[i&(len(items)-1)], items[i&(len(items)-1)], 1)
		i++
	}
}

var seed = maphash.MakeSeed()

func key(item string) uint64 { return maphash.String(seed, item) }
