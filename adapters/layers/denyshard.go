package layers

import (
	"container/heap"
	"sync"
)

// The deny cache's storage: shards of denials, each a map for lookups
// and a heap by end for eviction.

// denyShard is one locked part of the cache: a map for lookups and a heap
// by expiry for eviction, both holding the same denials.
type denyShard struct {
	mu       sync.RWMutex // guards m and byEnd
	m        map[denyKey]*denial
	byEnd    denialHeap
	capacity int
}

// put stores d, replacing the key's previous denial; when the shard is
// full it first evicts the denial that ends soonest.
func (s *denyShard) put(d *denial, now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.m[d.key]; old != nil {
		d.index = old.index
		s.byEnd[d.index] = d
		s.m[d.key] = d
		heap.Fix(&s.byEnd, d.index)
		return
	}
	for len(s.byEnd) > 0 && (len(s.byEnd) >= s.capacity || s.byEnd[0].until <= now) {
		gone := heap.Pop(&s.byEnd).(*denial)
		delete(s.m, gone.key)
	}
	heap.Push(&s.byEnd, d)
	s.m[d.key] = d
}

// remove drops d, unless another denial replaced it meanwhile.
func (s *denyShard) remove(d *denial) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[d.key] == d {
		heap.Remove(&s.byEnd, d.index)
		delete(s.m, d.key)
	}
}

// denialHeap orders denials by their end, soonest first
// (container/heap).
type denialHeap []*denial

func (h denialHeap) Len() int           { return len(h) }
func (h denialHeap) Less(i, j int) bool { return h[i].until < h[j].until }
func (h denialHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *denialHeap) Push(x any) {
	d := x.(*denial)
	d.index = len(*h)
	*h = append(*h, d)
}
func (h *denialHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return d
}
