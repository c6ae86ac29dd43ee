package rlsconf

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"time"
)

// Watcher loads a directory as [LoadDir] does and reloads it when the
// content of its files changes: a file written, added or removed, or
// renamed into place, or a symbolic link swapped (a Kubernetes ConfigMap
// volume swaps its ..data link). It polls rather than waits for
// file-system events: reading a configuration's few files is cheap, and
// a poll sees every kind of change the same way, on every file system
// (inotify misses changes behind symbolic links, on network and overlay
// file systems, and coalesces editors' write-rename sequences). A Watcher
// is not safe for concurrent use; Run owns it.
type Watcher struct {
	dir     string
	sum     [sha256.Size]byte // of the files last loaded or rejected
	pending [sha256.Size]byte // of changed files seen once, not reported yet
	readErr string            // the last read error reported
	unread  string            // a read error seen once, not reported yet
}

// NewWatcher loads dir and returns a Watcher of it and the configuration.
// The error is LoadDir's: a [*FileError] naming the file.
func NewWatcher(dir string) (*Watcher, *Config, error) {
	w := &Watcher{dir: dir}
	files, skipped, err := readDir(dir)
	if err != nil {
		return nil, nil, err
	}
	c, err := Parse(files)
	if err != nil {
		return nil, nil, err
	}
	c.skipped = skipped
	w.sum = fingerprint(files)
	return w, c, nil
}

// Poll reads the directory again. It returns changed=false when its
// files are what they were at the last load or rejection; else the new
// configuration, or the error that rejects it (a [*FileError]: that
// content is then not reported again until it changes). A change, valid
// or not, is reported only when the next Poll finds the same content: a
// file written in place may be read half written, its first part may
// parse on its own, and the next Poll reads it whole. A file that cannot
// be read (a link being swapped, or left dangling) is an error too,
// reported only when the next Poll finds it again, and then once until it
// changes.
func (w *Watcher) Poll() (c *Config, changed bool, err error) {
	files, skipped, err := readDir(w.dir)
	if err != nil {
		msg := err.Error()
		if msg == w.readErr {
			return nil, false, nil
		}
		if msg != w.unread {
			w.unread = msg // perhaps in mid-swap: reported if it stays so
			return nil, false, nil
		}
		w.readErr, w.unread = msg, ""
		return nil, true, err
	}
	w.readErr, w.unread = "", ""
	sum := fingerprint(files)
	if sum == w.sum {
		w.pending = [sha256.Size]byte{}
		return nil, false, nil
	}
	if sum != w.pending {
		w.pending = sum // perhaps half written: reported if it stays so
		return nil, false, nil
	}
	c, err = Parse(files)
	w.sum, w.pending = sum, [sha256.Size]byte{}
	if c != nil {
		c.skipped = skipped
	}
	return c, true, err
}

// Run polls every interval until ctx ends, calling apply with each
// changed configuration and reject with each error, one call per change.
func (w *Watcher) Run(ctx context.Context, interval time.Duration, apply func(*Config), reject func(error)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c, changed, err := w.Poll()
		switch {
		case !changed:
		case err != nil:
			reject(err)
		default:
			apply(c)
		}
	}
}

// fingerprint hashes files' names and contents, each length-prefixed.
func fingerprint(files []File) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, f := range files {
		for _, b := range [][]byte{[]byte(f.Name), f.Data} {
			binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
			h.Write(n[:])
			h.Write(b)
		}
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
