package httpapi

import (
	"net/http"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/live"
)

// The live event streams (Server-Sent Events) are httpapi/live's, beside the hub that feeds
// them; the API routes them like its other endpoints.

// eventRoutes are the live event streams of /api/v1/events and /api/v1/tasks/{id}/events.
type eventRoutes struct{ *Server }

func (s eventRoutes) streams() live.Streams {
	return live.Streams{Hub: s.hub, Store: s.Store, View: s.view}
}

// taskEvents answers GET /api/v1/tasks/{id}/events (live.Streams.TaskEvents).
func (s eventRoutes) taskEvents(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	return s.streams().TaskEvents(w, r, p)
}

// scopeEvents answers GET /api/v1/events (live.Streams.ScopeEvents).
func (s eventRoutes) scopeEvents(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	return s.streams().ScopeEvents(w, r, p)
}
