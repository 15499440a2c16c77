// Package dxredis holds the storage model of the dxredis Redis provider: the keyspace (keys.go,
// keys_worker.go: one function per key, with its Redis type) and the Lua scripts that change it
// (scripts/, one file per atomic operation, served as a Redis Functions library or as EVAL
// scripts by scripts.go). Reading keys.go and scripts/ shows the entire storage model.
//
// The provider itself is package redisprovider; the contract it implements is package provider.
package dxredis
