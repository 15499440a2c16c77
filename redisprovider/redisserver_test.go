package redisprovider_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startRedisServer starts a throw-away redis-server on a free loopback port (no persistence,
// noeviction, extra config args appended) for tests that change server settings, and returns its
// address and a client on it. Without redis-server on PATH the test is skipped, except in CI.
func startRedisServer(t testing.TB, args ...string) (string, *redis.Client) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not on PATH (CI must install it)")
		}
		t.Skip("redis-server is not on PATH")
	}
	for try := 0; try < 5; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		dir := t.TempDir()
		cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction", "--dir", dir,
			"--logfile", filepath.Join(dir, "redis.log")}, args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		c := redis.NewClient(&redis.Options{Addr: addr})
		for i := 0; i < 100; i++ {
			if c.Ping(context.Background()).Err() == nil {
				t.Cleanup(func() {
					_ = c.Close()
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				})
				return addr, c
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = c.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Fatal("redis-server did not start")
	return "", nil
}
