package conn

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// lossyRedis is a one-node Redis Cluster on loopback, enough for
// go-redis's ClusterClient, that drops the connection on every script run
// (EVALSHA, EVAL), as a network that loses the reply of a script that
// ran would: it counts the runs of each key.
type lossyRedis struct {
	ln       net.Listener
	tryAgain bool // answer each key's first script TRYAGAIN (it did not run), then run it
	mu       sync.Mutex
	runs     map[string]int // guarded by mu
	refused  map[string]int // guarded by mu: the TRYAGAINs answered
}

func startLossyRedis(t *testing.T, tryAgain bool) *lossyRedis {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &lossyRedis{ln: ln, tryAgain: tryAgain, runs: make(map[string]int), refused: make(map[string]int)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *lossyRedis) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	host, port, _ := net.SplitHostPort(s.ln.Addr().String())
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		var reply string
		switch name := strings.ToLower(args[0]); {
		case (name == "evalsha" || name == "eval") && len(args) > 3:
			s.mu.Lock()
			refuse := s.tryAgain && s.refused[args[3]] == 0
			if refuse {
				s.refused[args[3]]++
			} else {
				s.runs[args[3]]++
			}
			s.mu.Unlock()
			if !s.tryAgain {
				return // the script ran; its reply is lost with the connection
			}
			reply = ":1\r\n"
			if refuse {
				reply = "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
			}
		case name == "cluster" && len(args) > 1 && strings.EqualFold(args[1], "slots"):
			reply = fmt.Sprintf("*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$%d\r\n%s\r\n:%s\r\n$4\r\nnode\r\n", len(host), host, port)
		case name == "ping":
			reply = "+PONG\r\n"
		case name == "hello":
			reply = "-ERR unknown command 'hello'\r\n"
		default:
			reply = "+OK\r\n"
		}
		if _, err := io.WriteString(c, reply); err != nil {
			return
		}
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil {
		return nil, err
	}
	args := make([]string, n)
	for i := range args {
		if _, err := r.ReadString('\n'); err != nil { // $<len>
			return nil, err
		}
		a, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		args[i] = strings.TrimSuffix(a, "\r\n")
	}
	return args, nil
}

// TestClusterScriptsNeverResent: on Redis Cluster (go-redis's
// ClusterClient, which re-sends a command or a node's pipeline after a
// lost reply whatever MaxRetries says), a script whose reply is lost ran
// once: the decision fails and the fail mode decides, never counted
// twice. Alone and in a batch.
func TestClusterScriptsNeverResent(t *testing.T) {
	t.Parallel()
	srv := startLossyRedis(t, false)
	c, err := Open("redis://"+srv.ln.Addr().String(), Options{Cluster: true, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range []int{1, 5} {
		errs := make(chan error, n)
		for i := range n {
			go func() {
				cmd := goredis.NewCmd(context.Background(), "evalsha", "0123456789012345678901234567890123456789", 1, fmt.Sprintf("rl:{t%d-%d}", n, i))
				errs <- c.eval(context.Background(), cmd, "return 1")
			}()
		}
		for range n {
			if err := <-errs; err == nil {
				t.Errorf("%d scripts: one succeeded on a connection that dropped", n)
			}
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.runs) == 0 {
		t.Fatal("no script reached the server")
	}
	for key, runs := range srv.runs {
		if runs != 1 {
			t.Errorf("the script on %s, whose reply was lost, ran %d times: want once (never sent again)", key, runs)
		}
	}
}

// TestClusterScriptsRetriedWhereTheyDidNotRun: an error reply says the
// script did not run (TRYAGAIN while a slot's keys are split by a
// reshard): go-redis sends it again, and the decision is the store's, run
// once.
func TestClusterScriptsRetriedWhereTheyDidNotRun(t *testing.T) {
	t.Parallel()
	srv := startLossyRedis(t, true)
	c, err := Open("redis://"+srv.ln.Addr().String(), Options{Cluster: true, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cmd := goredis.NewCmd(context.Background(), "evalsha", "0123456789012345678901234567890123456789", 1, "rl:{t}")
	if err := c.eval(context.Background(), cmd, "return 1"); err != nil || cmd.Val() != int64(1) {
		t.Fatalf("a script answered TRYAGAIN once: %v, %v; want its reply on the retry", cmd.Val(), err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.refused["rl:{t}"] != 1 || srv.runs["rl:{t}"] != 1 {
		t.Errorf("TRYAGAIN %d times, runs %d: want 1 and 1", srv.refused["rl:{t}"], srv.runs["rl:{t}"])
	}
}
