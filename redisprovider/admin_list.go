package redisprovider

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

// ListInstances implements provider.Admin: every instance created by an ack with a name and a
// version, oldest first (idx:instances order). It walks the index in pages of 1000; for very
// large namespaces prefer ListInstancesPage.
func (p *Provider) ListInstances(ctx context.Context) ([]string, error) {
	return p.listAll(ctx, "list_instances", "")
}

// ListInstancesByStatus implements provider.Admin: the instances whose current status is status,
// in idx:status:<status> order (lowest score, i.e. oldest, first).
func (p *Provider) ListInstancesByStatus(ctx context.Context, status string) ([]string, error) {
	if status == "" {
		return nil, invalid("list_instances_by_status", "empty status")
	}
	return p.listAll(ctx, "list_instances_by_status", status)
}

func (p *Provider) listAll(ctx context.Context, op, status string) ([]string, error) {
	out := []string{}
	cursor := ""
	for {
		ids, next, err := p.listPage(ctx, op, cursor, listPageSize, status)
		if err != nil {
			return nil, err
		}
		out = append(out, ids...)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// ListInstancesPage returns one page of instance ids, at most limit (DefaultPageLimit when
// limit <= 0, at most MaxPageLimit), and the cursor of the next page ("" after the last page).
// With status "" it walks every instance by creation time, oldest first; otherwise the instances
// whose current status is status, in idx:status:<status> order (oldest score first). Pass "" as
// cursor for the first page. Each page costs O(log N + limit). Ids created or removed between
// pages never make a page skip or repeat an id that stayed put; an instance whose status index
// score grows during the walk moves to the end of the index and may be listed again (never
// missed).
func (p *Provider) ListInstancesPage(ctx context.Context, cursor string, limit int, status string) ([]string, string, error) {
	return p.listPage(ctx, "list_instances_page", cursor, limit, status)
}

func (p *Provider) listPage(ctx context.Context, op, cursor string, limit int, status string) ([]string, string, error) {
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	limit = min(limit, MaxPageLimit)
	score, member := "", ""
	if cursor != "" {
		var err error
		if score, member, err = decodeCursor(cursor); err != nil {
			return nil, "", invalid(op, "bad cursor %q: %v", cursor, err)
		}
	}
	multi := p.keys.Partitions() > 1
	args, err := argsOf(op, luascripts.AdminList, "status", status, "cscore", score, "cmember", member, "limit", strconv.Itoa(limit), "scores", boolArg(multi))
	if err != nil {
		return nil, "", err
	}
	if multi {
		return p.listMerged(ctx, op, limit, args)
	}
	res, err := p.run(ctx, op, luascripts.AdminList.Op, 0, args...)
	if err != nil {
		return nil, "", err
	}
	r := list(res)
	if len(r) < 2 {
		return nil, "", provider.NewPermanentError(op, "unexpected reply from admin_list")
	}
	ids := make([]string, 0, len(r)-2)
	for _, v := range r[2:] {
		ids = append(ids, str(v))
	}
	next := ""
	if s := str(r[0]); s != "" {
		next = encodeCursor(s, str(r[1]))
	}
	return ids, next, nil
}

// listMerged is one page over every partition of a namespace of several: each lists its page
// after the cursor, with scores, and the pages are merged in (score, id) order, the index order of
// one partition. Cost: one script per partition per page.
func (p *Provider) listMerged(ctx context.Context, op string, limit int, args []any) ([]string, string, error) {
	type entry struct {
		id    string
		score float64
		text  string
	}
	var all []entry
	more := false
	err := p.eachPartition(ctx, func(ctx context.Context, part int) ([]any, error) {
		res, err := p.run(ctx, op, luascripts.AdminList.Op, part, args...)
		return list(res), err
	}, func(part int, r []any) error {
		if len(r) < 2 || len(r)%2 != 0 {
			return provider.NewPermanentError(op, "unexpected reply from admin_list")
		}
		more = more || str(r[0]) != ""
		for i := 2; i+1 < len(r); i += 2 {
			f, _ := strconv.ParseFloat(str(r[i+1]), 64)
			all = append(all, entry{str(r[i]), f, str(r[i+1])})
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	slices.SortFunc(all, func(a, b entry) int {
		if c := cmp.Compare(a.score, b.score); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	ids := []string{}
	next := ""
	for i, e := range all {
		if i == limit {
			more = true
			break
		}
		ids = append(ids, e.id)
	}
	if more && len(ids) > 0 {
		last := all[len(ids)-1]
		next = encodeCursor(last.text, last.id)
	}
	return ids, next, nil
}

// eachPartition runs call in every partition at once and hands each reply to merge, one at a
// time in partition order; the first error is returned.
func (p *Provider) eachPartition(ctx context.Context, call func(ctx context.Context, part int) ([]any, error), merge func(part int, r []any) error) error {
	replies := make([][]any, p.keys.Partitions())
	if err := p.inPartitions(ctx, func(ctx context.Context, part int) (err error) {
		replies[part], err = call(ctx, part)
		return err
	}); err != nil {
		return err
	}
	for part, r := range replies {
		if err := merge(part, r); err != nil {
			return err
		}
	}
	return nil
}

// inPartitions runs fn for every partition, at once when there are several; the first error (in
// partition order) is returned, joined with the others, after every call ended. fn stores its
// results by partition.
func (p *Provider) inPartitions(ctx context.Context, fn func(ctx context.Context, part int) error) error {
	n := p.keys.Partitions()
	if n == 1 {
		return fn(ctx, 0)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for part := range n {
		wg.Go(func() { errs[part] = fn(ctx, part) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// A cursor is the (score, id) of the last id of a page, base64url-encoded so that it is one
// shell-safe word whatever the id holds.
func encodeCursor(score, member string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(score + ":" + member))
}

func decodeCursor(c string) (score, member string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", "", err
	}
	score, member, ok := strings.Cut(string(b), ":")
	if !ok {
		return "", "", fmt.Errorf("no score")
	}
	if _, err := strconv.ParseFloat(score, 64); err != nil {
		return "", "", fmt.Errorf("bad score: %w", err)
	}
	return score, member, nil
}
