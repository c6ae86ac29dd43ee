// Package memory implements tollgate's stores in process memory: every
// algorithm of [domain.Algorithms] as a [Limiter] ([New]). A memory store
// serves one gateway replica; several replicas need the redis adapter, or
// each hands out the full budget.
//
// Every limiter sweeps the keys whose budget is whole again in one
// background goroutine, so its memory is bounded by the keys active
// within a window (plus one sweep interval), and by [Options].MaxKeys.
// Call Close to stop it.
package memory
