package httpapi

import (
	"context"
	"net/http"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/live"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store"
)

// The live event streams (Server-Sent Events) are httpapi/live's, beside the hub that feeds
// them; the API routes them like its other endpoints.

// eventRoutes are the live event streams of /api/v1/events and /api/v1/tasks/{id}/events.
type eventRoutes struct{ *Server }

// streams serves r's streams, their task views in r's language (readerLang).
func (s eventRoutes) streams(w http.ResponseWriter, r *http.Request) live.Streams {
	lang := readerLang(w, r)
	return live.Streams{Hub: s.hub, Store: s.Store, View: func(ctx context.Context, t *store.Task) task.View { return s.view(ctx, t, lang) }}
}

// taskEvents answers GET /api/v1/tasks/{id}/events (live.Streams.TaskEvents).
func (s eventRoutes) taskEvents(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	return s.streams(w, r).TaskEvents(w, r, p)
}

// scopeEvents answers GET /api/v1/events (live.Streams.ScopeEvents).
func (s eventRoutes) scopeEvents(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	return s.streams(w, r).ScopeEvents(w, r, p)
}
