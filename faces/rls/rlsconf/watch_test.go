package rlsconf_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

func domainFile(domain string, rpu int) string {
	return "domain: " + domain + "\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: " + strconv.Itoa(rpu) + "}\n"
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replace writes data at path whole: into a temporary file renamed over
// it, as editors and deployment tools do (a poll never reads it half
// written).
func replace(t *testing.T, path, data string) {
	t.Helper()
	write(t, path+".tmp", data)
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// rpu returns the requests per unit of domain's rule for key k, or -1.
func rpu(c *rlsconf.Config, domain string) int {
	r, _ := c.Match(domain, []rlsconf.Entry{{Key: "k", Value: "v"}})
	if r == nil {
		return -1
	}
	return int(r.RequestsPerUnit)
}

// TestWatcherPoll: every kind of change is seen once; a broken change is
// reported once and the caller keeps its configuration; dotfiles and
// other names are not read.
func TestWatcherPoll(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), domainFile("a", 1))
	w, c, err := rlsconf.NewWatcher(dir)
	if err != nil || rpu(c, "a") != 1 {
		t.Fatalf("NewWatcher: %v, a=%d", err, rpu(c, "a"))
	}
	poll := func(step string, wantChanged, wantErr bool) *rlsconf.Config {
		t.Helper()
		c, changed, err := w.Poll()
		if changed != wantChanged || (err != nil) != wantErr {
			t.Fatalf("%s: Poll() = changed %v, err %v; want changed %v, error %v", step, changed, err, wantChanged, wantErr)
		}
		return c
	}
	poll("nothing changed", false, false)
	write(t, filepath.Join(dir, "a.yaml"), domainFile("a", 1)) // rewritten as it was
	poll("the same content", false, false)
	write(t, filepath.Join(dir, "a.yaml"), domainFile("a", 2))
	poll("a file rewritten, seen once (perhaps half written)", false, false)
	if c := poll("a file rewritten", true, false); rpu(c, "a") != 2 {
		t.Errorf("after the rewrite: a=%d, want 2", rpu(c, "a"))
	}
	write(t, filepath.Join(dir, "b.yml"), domainFile("b", 3))
	poll("a file added, seen once", false, false)
	if c := poll("a file added", true, false); rpu(c, "a") != 2 || rpu(c, "b") != 3 {
		t.Errorf("after the addition: a=%d b=%d, want 2 and 3", rpu(c, "a"), rpu(c, "b"))
	}
	write(t, filepath.Join(dir, ".hidden.yaml"), "not: [yaml")
	write(t, filepath.Join(dir, "notes.txt"), "not: [yaml")
	poll("a dotfile and another name", false, false)
	write(t, filepath.Join(dir, "c.yaml"), "domain: c\nbogus_key: 1\n")
	poll("a broken file, seen once (perhaps half written)", false, false)
	_, _, err = w.Poll()
	var fe *rlsconf.FileError
	if !errors.As(err, &fe) || fe.Path != filepath.Join(dir, "c.yaml") || !errors.Is(err, rlsconf.ErrUnknownKey) {
		t.Fatalf("a broken file: %v, want a FileError naming c.yaml", err)
	}
	poll("the same broken content", false, false)
	if err := os.Remove(filepath.Join(dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	poll("the broken file removed, seen once", false, false)
	if c := poll("the broken file removed", true, false); rpu(c, "b") != 3 {
		t.Errorf("after the removal: b=%d, want 3", rpu(c, "b"))
	}
	// A link left dangling for a moment (a ConfigMap key removed): not
	// reported on first sight, reported once when it stays, and gone
	// when the link is.
	dangling := filepath.Join(dir, "d.yaml")
	if err := os.Symlink(filepath.Join(dir, "missing.yaml"), dangling); err != nil {
		t.Fatal(err)
	}
	poll("a dangling link, seen once (perhaps in mid-swap)", false, false)
	if _, _, err := w.Poll(); !errors.As(err, &fe) || fe.Path != dangling {
		t.Fatalf("a dangling link, seen twice: %v, want a FileError naming d.yaml", err)
	}
	poll("the same dangling link", false, false)
	if err := os.Remove(dangling); err != nil {
		t.Fatal(err)
	}
	poll("the dangling link removed: the configuration as it was", false, false)
	if err := os.Symlink(filepath.Join(dir, "missing.yaml"), dangling); err != nil {
		t.Fatal(err)
	}
	poll("a dangling link again, seen once", false, false)
	if err := os.Remove(dangling); err != nil {
		t.Fatal(err)
	}
	poll("removed before a second look: never reported", false, false)
}

// TestWatcherHalfWritten: a file rewritten in place in two writes may be
// read after the first, and a prefix of a configuration can parse (here,
// the rule's key without its limit: every request OK). Poll applies a
// change only when a second Poll finds it unchanged.
func TestWatcherHalfWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	write(t, path, domainFile("a", 3))
	w, _, err := rlsconf.NewWatcher(dir)
	if err != nil {
		t.Fatal(err)
	}
	full := domainFile("a", 4)
	prefix := full[:strings.Index(full, "    rate_limit")]
	if _, err := rlsconf.Parse([]rlsconf.File{{Name: path, Data: []byte(prefix)}}); err != nil {
		t.Fatalf("the prefix %q does not parse (%v): the test needs one that does", prefix, err)
	}
	write(t, path, prefix)
	if c, changed, err := w.Poll(); changed {
		t.Fatalf("the first half, seen once: Poll() = changed, a=%d, err %v; want unchanged until a second Poll agrees", rpu(c, "a"), err)
	}
	write(t, path, full)
	if c, changed, err := w.Poll(); changed {
		t.Fatalf("the whole file, seen once: Poll() = changed, a=%d, err %v; want unchanged until a second Poll agrees", rpu(c, "a"), err)
	}
	if c, changed, err := w.Poll(); !changed || err != nil || rpu(c, "a") != 4 {
		t.Fatalf("the whole file, seen twice: Poll() = changed %v, err %v, a=%d; want the new file (4)", changed, err, rpu(c, "a"))
	}
	// A change undone before a second look is never applied, nor is it
	// when it comes back: the second look must follow the first.
	write(t, path, prefix)
	w.Poll()
	write(t, path, full)
	if _, changed, _ := w.Poll(); changed {
		t.Fatal("the file back as it was: Poll() = changed, want unchanged")
	}
	write(t, path, prefix)
	if c, changed, _ := w.Poll(); changed {
		t.Fatalf("the prefix again, after it was undone: Poll() = changed, a=%d; want unchanged until a second Poll agrees", rpu(c, "a"))
	}
}

// TestWatcherConfigMap: a Kubernetes ConfigMap volume's files are links
// through ..data to a timestamped directory; an update swaps ..data.
func TestWatcherConfigMap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gen := func(name string, rpu int) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, name, "rls.yaml"), domainFile("cm", rpu))
	}
	gen("..2026_01", 1)
	if err := os.Symlink("..2026_01", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/rls.yaml", filepath.Join(dir, "rls.yaml")); err != nil {
		t.Fatal(err)
	}
	w, c, err := rlsconf.NewWatcher(dir)
	if err != nil || rpu(c, "cm") != 1 {
		t.Fatalf("NewWatcher: %v, cm=%d", err, rpu(c, "cm"))
	}
	// The kubelet's swap: a new directory, a new link renamed over ..data.
	gen("..2026_02", 2)
	if err := os.Symlink("..2026_02", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "..2026_01")); err != nil {
		t.Fatal(err)
	}
	if _, changed, err := w.Poll(); changed {
		t.Fatalf("after the swap, seen once: changed, err %v; want unchanged until a second Poll agrees", err)
	}
	c, changed, err := w.Poll()
	if err != nil || !changed || rpu(c, "cm") != 2 {
		t.Errorf("after the swap: changed %v, err %v, cm=%d; want the new file (2)", changed, err, rpu(c, "cm"))
	}
}

// TestWatcherRun: Run applies a change within its interval and reports
// a rejection, once each.
func TestWatcherRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), domainFile("a", 1))
	w, _, err := rlsconf.NewWatcher(dir)
	if err != nil {
		t.Fatal(err)
	}
	applied, rejected := make(chan *rlsconf.Config, 4), make(chan error, 4)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, 10*time.Millisecond, func(c *rlsconf.Config) { applied <- c }, func(err error) { rejected <- err })
	}()
	replace(t, filepath.Join(dir, "a.yaml"), domainFile("a", 5))
	select {
	case c := <-applied:
		if rpu(c, "a") != 5 {
			t.Errorf("applied a=%d, want 5", rpu(c, "a"))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no change applied within 5 s")
	}
	replace(t, filepath.Join(dir, "a.yaml"), "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	select {
	case err := <-rejected:
		if !errors.Is(err, rlsconf.ErrBadUnit) {
			t.Errorf("rejected with %v, want ErrBadUnit", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no rejection within 5 s")
	}
	cancel()
	<-done
	if len(applied)+len(rejected) != 0 {
		t.Errorf("%d more applications and %d more rejections, want one of each", len(applied), len(rejected))
	}
}
