package httpapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/internal/textcheck"
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

// ownerQuery reads a list's ?owner=: empty (the caller's own, or everyone's for an admin), or
// a user name, which only an admin may give for someone else. what names the listed things.
func ownerQuery(q url.Values, p identity.Principal, what string) (string, error) {
	owner := q.Get("owner")
	if msg := textcheck.Problem(owner, 200); msg != "" {
		return "", problem.Invalid("invalid_query", "owner "+msg, problem.FieldError{Field: "owner", Message: msg})
	}
	if owner != "" && !p.Scope().Admin && owner != p.User {
		msg := "only an admin can list other users' " + what
		return "", problem.Invalid("invalid_query", msg, problem.FieldError{Field: "owner", Message: msg})
	}
	return owner, nil
}
