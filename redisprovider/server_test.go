package redisprovider_test

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

// Throw-away redis-server processes for the tests that kill, restart or fail over a server (never
// the shared DXREDIS_TEST_ADDR one). They need the redis-server binary (Debian's redis-server
// package; .ci/run installs it) and are skipped only when it is absent.

// longTests runs the long variants (more kills, longer load): DXREDIS_LONG_TESTS=1.
func longTests() bool { return os.Getenv("DXREDIS_LONG_TESTS") != "" }

// redisServer is one redis-server process on a loopback port, with its files in dir.
type redisServer struct {
	t        testing.TB
	dir      string
	port     int
	args     []string
	sentinel []string // config lines of a Sentinel (nil: a plain server)
	cmd      *exec.Cmd
}

// needRedisServer skips the test when the redis-server binary is absent.
func needRedisServer(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed (apt-get install redis-server); this test starts its own servers")
	}
}

// freePort returns a loopback port nothing listens on (another process may still take it; start
// retries on another port then).
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startThrowawayServer starts redis-server with args (after the port, bind, dir and logfile) on a free
// port, in a fresh directory; the server is killed when the test ends.
func startThrowawayServer(t testing.TB, args ...string) *redisServer {
	t.Helper()
	return startServer(t, &redisServer{t: t, dir: t.TempDir(), args: args})
}

// startSentinel starts redis-server in Sentinel mode with the given config lines.
func startSentinel(t testing.TB, conf ...string) *redisServer {
	t.Helper()
	return startServer(t, &redisServer{t: t, dir: t.TempDir(), sentinel: conf})
}

func startServer(t testing.TB, s *redisServer) *redisServer {
	t.Helper()
	needRedisServer(t)
	for try := 0; ; try++ {
		s.port = freePort(t)
		if err := s.start(); err == nil {
			break
		} else if try == 4 {
			t.Fatalf("redis-server did not start: %v", err)
		}
	}
	t.Cleanup(s.kill)
	return s
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *redisServer) start() error {
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"), "--save", "", "--maxmemory-policy", "noeviction"}, s.args...)
	s.cmd = exec.Command("redis-server", args...)
	if s.sentinel != nil {
		// Sentinel reads (and rewrites) a config file.
		conf := filepath.Join(s.dir, "sentinel.conf")
		body := "port " + strconv.Itoa(s.port) + "\nbind 127.0.0.1\ndir " + s.dir + "\n" + strings.Join(s.sentinel, "\n") + "\n"
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			return err
		}
		s.cmd = exec.Command("redis-server", conf, "--sentinel")
	}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
	defer c.Close()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var pid string
		info, ierr := c.Info(context.Background(), "server").Result()
		if err = ierr; err == nil {
			// The server answering must be ours, not another process that took the port.
			pid = "process_id:" + strconv.Itoa(s.cmd.Process.Pid)
			if containsLine(info, pid) {
				return nil
			}
			err = net.ErrClosed
		}
	}
	s.kill()
	return err
}

// kill SIGKILLs the server (no shutdown save, no AOF rewrite) and waits for it.
func (s *redisServer) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// stop and resume freeze and thaw the server (SIGSTOP, SIGCONT): it holds its connections but
// answers nothing.
func (s *redisServer) stop()   { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *redisServer) resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// restart starts the server again on the same port and directory (same data).
func (s *redisServer) restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
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
