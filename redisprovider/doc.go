// Package redisprovider implements duroxide's storage contract (provider.Provider and
// provider.Admin) on Redis with go-redis.
//
// Every state change is one Lua script (one round trip) that checks everything before its first
// write, reads the Redis server's clock and never decodes JSON: Go encodes payloads and computes
// routing fields. Fetches long-poll: with nothing eligible they block on wake lists that every
// script making work eligible pushes to. Expired locks are reclaimed by the fetch scripts, so no
// background process is needed for correctness.
//
// New checks the server at start (reachable, scripts load, maxmemory-policy does not evict) and
// works with single nodes, Sentinel and Redis Cluster (all keys of a namespace share one hash
// tag). Options documents every setting and its default.
package redisprovider
