package redisprovider

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

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
	args, err := argsOf(op, luascripts.AdminList, "status", status, "cscore", score, "cmember", member, "limit", strconv.Itoa(limit))
	if err != nil {
		return nil, "", err
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
