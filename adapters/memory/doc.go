// Package memory implements tollgate's stores in process memory: the
// fixed-window [Counter] and the other algorithms' limiters. A memory
// store serves one gateway replica; several replicas need the redis
// adapter, or each hands out the full budget.
//
// Every store sweeps its expired keys in one background goroutine, so its
// memory is bounded by the keys active within a window (plus one sweep
// interval). Call Close to stop it.
package memory
