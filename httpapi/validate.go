package httpapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/store"
)

// maxCursor caps the cursor parameter before it is decoded.
const maxCursor = 96

// The cursor is "<created_at unix micros>:<id>" for the default sort (newest first, the
// form cursors have always had, so one given out before a deploy still works after it) and
// "<sort>:<key>:<id>" for every other sort, in unpadded base64url. The key is the last
// task's in that sort (store.Cursor). decodeCursor accepts exactly what encodeCursor writes
// for a real task: a key the sort can have and an id ≥ 1.
func encodeCursor(c store.Cursor) string {
	if c.Sort == "" || c.Sort == store.SortNewest {
		return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d:%d", c.Key, c.ID))
	}
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s:%d:%d", c.Sort, c.Key, c.ID))
}

func decodeCursor(s string) (*store.Cursor, error) {
	bad := errors.New("bad cursor")
	if len(s) > maxCursor {
		return nil, errors.New("cursor too long")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(string(b), ":")
	c := &store.Cursor{Sort: store.SortNewest}
	switch len(parts) {
	case 2:
	case 3:
		c.Sort, parts = store.Sort(parts[0]), parts[1:]
		if c.Sort == store.SortNewest || !c.Sort.Valid() {
			return nil, bad
		}
	default:
		return nil, bad
	}
	key, err1 := strconv.ParseInt(parts[0], 10, 64)
	id, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || id < 1 || !keyInRange(c.Sort, key) {
		return nil, bad
	}
	c.Key, c.ID = key, id
	if encodeCursor(*c) != s {
		return nil, bad
	}
	return c, nil
}

// keyInRange reports whether a task can have key in sort: a creation time filters accept,
// a run time (or the place of none: -1 longest first, the largest key shortest first), a
// count of rows.
func keyInRange(sort store.Sort, key int64) bool {
	switch sort {
	case store.SortNewest, store.SortOldest:
		return export.TimeInRange(time.UnixMicro(key))
	case store.SortLongest:
		return key >= -1 && key < math.MaxInt64
	case store.SortShortest, store.SortMostFailed, store.SortFewestFailed:
		return key >= 0
	}
	return false
}
