package redisprovider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	dxredis "github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/provider"
)

// FormatError says that a namespace's storage format is not the one this release reads and
// writes (dxredis.Format), or that `dxctl migrate` is converting it. New returns it before
// writing anything; a write script that meets such a namespace later (another process migrated
// or replaced it) fails with it too, wrapped in a *provider.ProviderError (errors.As finds it).
type FormatError struct {
	Namespace string
	Found     int  // the namespace's format (1: the layout of the releases before format 2)
	Migrating bool // dxctl migrate is converting it (Found is the format it comes from)
}

func (e *FormatError) Error() string {
	switch {
	case e.Migrating:
		return fmt.Sprintf("dxredis: namespace %q is being migrated from format %d to format %d: wait for `dxctl migrate` to finish, or run it again if it stopped",
			e.Namespace, e.Found, dxredis.Format)
	case e.Found < dxredis.Format:
		return fmt.Sprintf("dxredis: namespace %q is in storage format %d, this release reads and writes format %d: stop the runtimes that use it and run `dxctl migrate --ns %s`",
			e.Namespace, e.Found, dxredis.Format, e.Namespace)
	default:
		return fmt.Sprintf("dxredis: namespace %q is in storage format %d, newer than this release's %d: upgrade dxredis",
			e.Namespace, e.Found, dxredis.Format)
	}
}

// NamespaceFormat reads a namespace partition's format without writing: 0 for a namespace with
// no data yet (its first write makes it format 2), 1 for format-1 data (no format record, the
// STRING sequence key), else the record's format; migrating while dxctl migrate converts it.
// Scripts decide the same way (lib.lua, format_check).
func NamespaceFormat(ctx context.Context, c redis.Cmdable, keys dxredis.Keyspace, partition int) (format int, migrating bool, err error) {
	pipe := c.Pipeline()
	meta := pipe.HMGet(ctx, keys.Meta(partition), "format", "migrating")
	seq := pipe.Exists(ctx, keys.Prefix(partition)+"seq")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, false, err
	}
	v := meta.Val()
	migrating = len(v) == 2 && v[1] != nil
	if s, ok := v[0].(string); ok {
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, migrating, fmt.Errorf("dxredis: namespace %q: format record %s holds format %q", keys.Namespace(), keys.Meta(partition), s)
		}
		return n, migrating, nil
	}
	if migrating || seq.Val() > 0 {
		return 1, migrating, nil
	}
	return 0, false, nil
}

// checkFormat refuses a namespace this release cannot use (New).
func (p *Provider) checkFormat(ctx context.Context) error {
	found, migrating, err := NamespaceFormat(ctx, p.rdb, p.keys, 0)
	if err != nil {
		return p.mapErr("new", err)
	}
	if migrating || (found != 0 && found != dxredis.Format) {
		return p.formatErr("new", &FormatError{Namespace: p.keys.Namespace(), Found: found, Migrating: migrating})
	}
	return nil
}

func (p *Provider) formatErr(op string, fe *FormatError) error {
	return provider.NewPermanentError(op, fe.Error()).WithKind(provider.ErrInvalidInput).WithCause(fe)
}

// scriptFormatErr maps a script's "DX_FORMAT <found> <text>" reply (lib.lua, format_check).
func (p *Provider) scriptFormatErr(op, rest string) error {
	found, text, _ := strings.Cut(rest, " ")
	n, _ := strconv.Atoi(found)
	return p.formatErr(op, &FormatError{Namespace: p.keys.Namespace(), Found: n, Migrating: strings.Contains(text, "being migrated")})
}
