// Package automation serves the API's resources that act without a person at the keyboard:
// webhook subscriptions and their deliveries (webhooks.go), which tell a URL of a task's
// events, and users' schedules (schedules.go), which submit a task on a cron spec. The webhook
// a submit's notify_url made is answered in its view (SubmittedView); jobs/webhook checks the
// URL and jobs.Submitter binds it.
//
// Its handlers have the REST API's shape, func(w, r, Principal) error: httpapi routes them,
// checks their scopes and writes their audit rows, and turns the errors they return into
// problems (a *problem.Problem passes through unchanged). It depends on httpapi/identity,
// httpapi/request and httpapi/problem below it, never on httpapi (httpapi's package comment
// draws the rooms).
package automation

import (
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/webhook"
	"github.com/taskcenter/taskcenter/store"
)

// Config is what the webhook and schedule handlers need.
type Config struct {
	Store *store.Store
	// Types are the task types this deployment knows: a schedule may name a submittable one.
	Types *jobs.Registry
	// Submitter says which types this deployment has enabled.
	Submitter *jobs.Submitter
	// Schedules bounds users' schedules (how often, how many). Zero: the config defaults.
	Schedules config.Schedules
	// Webhooks checks webhook URLs and secrets (webhooks.allowed_hosts). Nil allows no URL.
	Webhooks *webhook.Policy
}

// Service holds the handlers of /api/v1/webhooks and /api/v1/schedules.
type Service struct {
	Config
}

// New returns the handlers over c.
func New(c Config) *Service {
	if c.Schedules == (config.Schedules{}) {
		c.Schedules = config.Default().Schedules
	}
	return &Service{Config: c}
}
