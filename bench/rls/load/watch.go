package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// watch measures other processes over the load's window: their CPU
// time, and the commands a Redis ran.
type watch struct {
	pids   map[string]int
	redis  string
	before map[string]time.Duration
}

// newWatch parses -pids (name=pid,...) and keeps -redis. The load
// client itself is always watched, as "client".
func newWatch(pids, redis string) (*watch, error) {
	w := &watch{pids: map[string]int{"client": os.Getpid()}, redis: redis, before: map[string]time.Duration{}}
	for _, f := range strings.Split(pids, ",") {
		if f == "" {
			continue
		}
		name, pid, ok := strings.Cut(f, "=")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil {
			return nil, fmt.Errorf("-pids: %q is not name=pid", f)
		}
		w.pids[name] = n
	}
	return w, nil
}

// start reads the CPU times and resets Redis's stats.
func (w *watch) start() error {
	for name, pid := range w.pids {
		d, err := cpuTime(pid)
		if err != nil {
			return err
		}
		w.before[name] = d
	}
	if w.redis != "" {
		if _, err := redisCommand(w.redis, "CONFIG", "RESETSTAT"); err != nil {
			return err
		}
	}
	return nil
}

// stop returns each process's CPU time since start, and the commands
// Redis ran since (but INFO's and CONFIG's own).
func (w *watch) stop() (map[string]time.Duration, int64, error) {
	cpu := map[string]time.Duration{}
	for name, pid := range w.pids {
		d, err := cpuTime(pid)
		if err != nil {
			return nil, 0, err
		}
		cpu[name] = d - w.before[name]
	}
	var cmds int64
	if w.redis != "" {
		info, err := redisCommand(w.redis, "INFO", "commandstats")
		if err != nil {
			return nil, 0, err
		}
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
			if !ok || name == "info" || strings.HasPrefix(name, "config") {
				continue
			}
			n, _, _ := strings.Cut(rest, ",")
			c, _ := strconv.ParseInt(n, 10, 64)
			cmds += c
		}
	}
	return cpu, cmds, nil
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's times on Linux.
const clockTick = 100

// cpuTime returns pid's user and system CPU time so far.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command is in parentheses and may hold spaces: fields after it.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTick, nil
}

// redisCommand sends one command to addr and returns its reply (a
// status or a bulk string).
func redisCommand(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	switch head[0] {
	case '+':
		return strings.TrimSpace(head[1:]), nil
	case '$':
		n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
		if err != nil || n < 0 {
			return "", fmt.Errorf("redis %s: reply %q", args[0], head)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redis %s: reply %q", args[0], strings.TrimSpace(head))
}
