package redisprovider

import (
	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

// Script arguments are encoded from each operation's one schema (internal/luascripts/args.go),
// which the Lua side is built from too. An encoding that does not match its schema is a bug in
// this package: a permanent error, and nothing is sent.

// argsOf encodes the arguments of a schema of scalars (and an empty rest), given as name, value
// pairs in the schema's order.
func argsOf(op string, s *luascripts.Schema, pairs ...string) ([]any, error) {
	args, err := s.Encode(pairs...)
	return args, argsErr(op, err)
}

// encoded ends an Encoder's call.
func encoded(op string, e *luascripts.Encoder) ([]any, error) {
	args, err := e.Args()
	return args, argsErr(op, err)
}

// composed lays out an ack-and-fetch call (orch_ack_fetch, work_ack_fetch; lib.lua's
// ack_then_fetch): the ack's arguments, the fetch's (its lock nonce first), the count of the ack's.
func composed(op string, s *luascripts.Schema, ack, fetch []any) ([]any, error) {
	args, err := s.Compose(ack, fetch)
	return args, argsErr(op, err)
}

func argsErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return provider.NewPermanentError(op, "internal error: "+err.Error()).WithCause(err)
}

// The fixed positions of the fetches' lock nonces: each try of a long poll gets a new one.
var (
	fetchToken     = luascripts.OrchFetch.Index("token")
	workFetchToken = luascripts.WorkFetch.Index("token")
)
