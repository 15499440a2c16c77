// Package redistest starts throw-away redis-server processes for tests that must restart, kill,
// freeze or reconfigure a server (never the shared one a test run may point at).
package redistest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process started by a test; it is killed when the test ends.
type Server struct {
	t        testing.TB
	Dir      string   // its data directory (AOF, RDB, log)
	Port     int      // its loopback port
	Args     []string // extra arguments, used again by Restart
	sentinel []string // config lines of a Sentinel (nil: a plain server)
	cmd      *exec.Cmd
}

// Need skips the test when the redis-server binary is absent (and fails it under CI, which must
// install it).
func Need(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not on PATH (CI must install it)")
		}
		t.Skip("redis-server not installed (apt-get install redis-server); this test starts its own servers")
	}
}

// Start starts redis-server with args (after the port, bind, dir, logfile, no RDB saves and
// noeviction) on a free loopback port, in a fresh directory.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	return start(t, &Server{t: t, Dir: t.TempDir(), Args: args})
}

// StartSentinel starts redis-server in Sentinel mode with the given config lines.
func StartSentinel(t testing.TB, conf ...string) *Server {
	t.Helper()
	return start(t, &Server{t: t, Dir: t.TempDir(), sentinel: conf})
}

func start(t testing.TB, s *Server) *Server {
	t.Helper()
	Need(t)
	for try := 0; ; try++ {
		s.Port = freePort(t)
		if err := s.launch(); err == nil {
			break
		} else if try == 4 {
			t.Fatalf("redis-server did not start: %v", err)
		}
	}
	t.Cleanup(s.Kill)
	return s
}

// freePort returns a loopback port nothing listens on (another process may still take it; start
// then retries on another port).
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Addr is the server's address.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

func (s *Server) launch() error {
	args := append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.Dir,
		"--logfile", filepath.Join(s.Dir, "redis.log"), "--save", "", "--maxmemory-policy", "noeviction"}, s.Args...)
	s.cmd = exec.Command("redis-server", args...)
	if s.sentinel != nil {
		// Sentinel reads (and rewrites) a config file.
		conf := filepath.Join(s.Dir, "sentinel.conf")
		body := "port " + strconv.Itoa(s.Port) + "\nbind 127.0.0.1\ndir " + s.Dir + "\n" + strings.Join(s.sentinel, "\n") + "\n"
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			return err
		}
		s.cmd = exec.Command("redis-server", conf, "--sentinel")
	}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		info, ierr := c.Info(context.Background(), "server").Result()
		if err = ierr; err == nil {
			// The server answering must be ours, not another process that took the port.
			if containsLine(info, "process_id:"+strconv.Itoa(s.cmd.Process.Pid)) {
				return nil
			}
			err = net.ErrClosed
		}
	}
	s.Kill()
	return err
}

// Kill SIGKILLs the server (no shutdown save, no AOF rewrite) and waits for it.
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Stop and Resume freeze and thaw the server (SIGSTOP, SIGCONT): it holds its connections but
// answers nothing.
func (s *Server) Stop()   { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *Server) Resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) } // see Stop

// Restart starts the server again on the same port and directory (so with the same data), with
// Args as they are now.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.launch(); err != nil {
		s.t.Fatalf("restarting redis-server: %v", err)
	}
}

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSuffix(l, "\r") == line {
			return true
		}
	}
	return false
}
