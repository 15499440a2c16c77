package redisprovider_test

import "os"

// Throw-away redis-server processes for the tests that kill, restart or fail over a server (never
// the shared DXREDIS_TEST_ADDR one) come from internal/redistest. They need the redis-server
// binary (Debian's redis-server package; .ci/run installs it) and are skipped only when it is
// absent outside CI.

// longTests runs the long variants (more kills, longer load): DXREDIS_LONG_TESTS=1.
func longTests() bool { return os.Getenv("DXREDIS_LONG_TESTS") != "" }
