package httpapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/store"
)

// maxCursor caps the cursor parameter before it is decoded.
const maxCursor = 64

// The cursor is "<created_at unix micros>:<id>" in unpadded base64url. decodeCursor accepts
// exactly what encodeCursor writes for a real task: a time filters accept and an id ≥ 1.
func encodeCursor(c store.Cursor) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d:%d", c.CreatedAt.UnixMicro(), c.ID))
}

func decodeCursor(s string) (*store.Cursor, error) {
	if len(s) > maxCursor {
		return nil, errors.New("cursor too long")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, err
	}
	us, id, ok := strings.Cut(string(b), ":")
	if !ok {
		return nil, errors.New("bad cursor")
	}
	micros, err1 := strconv.ParseInt(us, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err1 != nil || err2 != nil || n < 1 {
		return nil, errors.New("bad cursor")
	}
	c := &store.Cursor{CreatedAt: time.UnixMicro(micros).UTC(), ID: n}
	if !export.TimeInRange(c.CreatedAt) || encodeCursor(*c) != s {
		return nil, errors.New("bad cursor")
	}
	return c, nil
}
