// Package topk finds the most frequent items of a stream in fixed
// memory: the Space-Saving sketch (Metwally, Agrawal and El Abbadi,
// "Efficient Computation of Frequent and Top-k Elements in Data
// Streams", 2005), and the merge of several sketches' summaries.
//
// A Sketch of capacity m monitors at most m items. Every item whose
// count is more than 1/m of the events it has seen is monitored, and a
// monitored item's Count overestimates its true count by at most its
// Err (Count − Err ≤ true ≤ Count).
package topk

import (
	"cmp"
	"slices"
)

// Counter is one monitored item of a sketch.
type Counter struct {
	// Item is what is counted.
	Item string `json:"item"`
	// Count overestimates the item's events since the sketch last
	// reset by at most Err: Count − Err ≤ true count ≤ Count.
	Count int64 `json:"count"`
	Err   int64 `json:"err,omitempty"`
	// Allowed counts what [Sketch.Touch] recorded of the item while it
	// was monitored (not part of the estimate).
	Allowed int64 `json:"allowed,omitempty"`
}

// Sketch is a Space-Saving sketch of fixed capacity: its memory is the
// capacity's whatever the number of distinct items added. The zero
// value is not usable; call [New]. A Sketch is not safe for concurrent
// use.
type Sketch struct {
	nodes []Counter        // the counters but their counts, in the order they were first used
	keys  []uint64         // each node's key
	pos   []int32          // each node's position in heap
	heap  []slot           // a min-heap by count: heap[0] is the smallest
	index map[uint64]int32 // key → its node
	n     int64            // events added since the last reset: the sum of counts
}

// slot is a place in the heap: a node's count, kept here so that the
// heap's comparisons read one array.
type slot struct {
	count int64
	node  int32
}

// New returns an empty sketch that monitors at most capacity items
// (at least 1).
func New(capacity int) *Sketch {
	capacity = max(capacity, 1)
	return &Sketch{
		nodes: make([]Counter, 0, capacity), keys: make([]uint64, 0, capacity),
		pos: make([]int32, 0, capacity), heap: make([]slot, 0, capacity),
		index: make(map[uint64]int32, capacity),
	}
}

// Cap returns the sketch's capacity.
func (s *Sketch) Cap() int { return cap(s.nodes) }

// N returns the events added since the last reset.
func (s *Sketch) N() int64 { return s.n }

// Add records n events (n ≥ 1) of item, known by key (a hash of item
// that no other item shares: items of one key are counted as one): a
// monitored item's count grows by n; a new one takes a free counter, or
// else the smallest counter's place, inheriting its count as its error.
func (s *Sketch) Add(key uint64, item string, n int64) {
	s.n += n
	if i, ok := s.index[key]; ok {
		h := int(s.pos[i])
		s.heap[h].count += n
		s.down(h)
		return
	}
	if len(s.nodes) < cap(s.nodes) {
		i := int32(len(s.nodes))
		s.nodes = append(s.nodes, Counter{Item: item})
		s.keys = append(s.keys, key)
		s.pos = append(s.pos, int32(len(s.heap)))
		s.heap = append(s.heap, slot{count: n, node: i})
		s.index[key] = i
		s.up(len(s.heap) - 1)
		return
	}
	i, least := s.heap[0].node, s.heap[0].count
	delete(s.index, s.keys[i])
	s.nodes[i] = Counter{Item: item, Err: least}
	s.keys[i] = key
	s.index[key] = i
	s.heap[0].count = least + n
	s.down(0)
}

// Touch counts one allowed event of the item of key when it is
// monitored, and reports whether it is.
func (s *Sketch) Touch(key uint64) bool {
	i, ok := s.index[key]
	if ok {
		s.nodes[i].Allowed++
	}
	return ok
}

// Keys calls f with the key of every monitored item.
func (s *Sketch) Keys(f func(key uint64)) {
	for _, k := range s.keys {
		f(k)
	}
}

// Reset empties the sketch, keeping its memory.
func (s *Sketch) Reset() {
	clear(s.index)
	clear(s.nodes) // drops the items' strings
	s.nodes, s.keys, s.pos, s.heap = s.nodes[:0], s.keys[:0], s.pos[:0], s.heap[:0]
	s.n = 0
}

// Summary returns what the sketch holds: its counters, most counted
// first, the events it has seen, and its floor.
func (s *Sketch) Summary() Summary {
	cs := slices.Clone(s.nodes)
	for i := range cs {
		cs[i].Count = s.heap[s.pos[i]].count
	}
	sortCounters(cs)
	sum := Summary{Counters: cs, N: s.n}
	if len(s.nodes) == cap(s.nodes) {
		sum.Floor = s.heap[0].count
	}
	return sum
}

func (s *Sketch) up(h int) {
	for h > 0 {
		p := (h - 1) / 2
		if s.heap[p].count <= s.heap[h].count {
			return
		}
		s.swap(h, p)
		h = p
	}
}

func (s *Sketch) down(h int) {
	heap := s.heap
	n := len(heap)
	for {
		l := 2*h + 1
		if l >= n {
			return
		}
		least := l
		if r := l + 1; r < n && heap[r].count < heap[l].count {
			least = r
		}
		if heap[h].count <= heap[least].count {
			return
		}
		s.swap(h, least)
		h = least
	}
}

func (s *Sketch) swap(h, g int) {
	s.heap[h], s.heap[g] = s.heap[g], s.heap[h]
	s.pos[s.heap[h].node] = int32(h)
	s.pos[s.heap[g].node] = int32(g)
}

// Summary is a sketch's content, or part of it: its counters, the
// events it saw (N), and its Floor, the most any item it does not hold
// may have been seen (0 when it holds every item it saw).
type Summary struct {
	Counters []Counter `json:"counters"`
	N        int64     `json:"n"`
	Floor    int64     `json:"floor,omitempty"`
}

// Truncate returns s with its k most counted counters only (s itself
// when it has no more), its Floor raised to what it dropped. An item
// seen more than N/k times is kept: k others counted as much would add
// up to more than N.
func (s Summary) Truncate(k int) Summary {
	if len(s.Counters) <= k {
		return s
	}
	cs := slices.Clone(s.Counters)
	sortCounters(cs)
	floor := max(s.Floor, cs[k].Count)
	return Summary{Counters: cs[:k:k], N: s.N, Floor: floor}
}

// Union returns the summary of sketches that saw disjoint items (the
// shards of one sketch, split by item): their counters together, their
// events summed, the highest floor.
func Union(parts ...Summary) Summary {
	var u Summary
	for _, p := range parts {
		u.Counters = append(u.Counters, p.Counters...)
		u.N += p.N
		u.Floor = max(u.Floor, p.Floor)
	}
	sortCounters(u.Counters)
	return u
}

// Estimate is an item's count over several summaries: at least Lower,
// at most Upper.
type Estimate struct {
	Item         string
	Upper, Lower int64
	Allowed      int64
}

// Merge returns the k items of sums (summaries of sketches over parts
// of one stream: other replicas, other minutes) with the highest upper
// bounds, highest first (then the highest lower bound, then by item).
// An item's upper bound adds, for every summary that lacks it, that
// summary's floor; its lower bound adds Count − Err where present. Every
// item seen more than N/m times in all (m the smallest capacity, N the
// events of every summary) is a candidate: it was seen more than a
// summary's N/m times in at least one of them.
func Merge(sums []Summary, k int) []Estimate {
	byItem := make(map[string]*Estimate)
	var floors int64
	for _, s := range sums {
		floors += s.Floor
	}
	for _, s := range sums {
		for _, c := range s.Counters {
			e := byItem[c.Item]
			if e == nil {
				e = &Estimate{Item: c.Item, Upper: floors}
				byItem[c.Item] = e
			}
			e.Upper += c.Count - s.Floor
			e.Lower += c.Count - c.Err
			e.Allowed += c.Allowed
		}
	}
	out := make([]Estimate, 0, len(byItem))
	for _, e := range byItem {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b Estimate) int {
		if c := cmp.Compare(b.Upper, a.Upper); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Lower, a.Lower); c != 0 {
			return c
		}
		return cmp.Compare(a.Item, b.Item)
	})
	if len(out) > k {
		out = out[:k]
	}
	return out
}

// sortCounters sorts cs most counted first, then by item.
func sortCounters(cs []Counter) {
	slices.SortFunc(cs, func(a, b Counter) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Item, b.Item)
	})
}
