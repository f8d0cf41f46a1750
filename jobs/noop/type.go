package noop

import (
	"time"

	"github.com/taskcenter/taskcenter/jobs"
)

// Params are bench:noop's: a free-form label, which the task does nothing with.
type Params struct {
	Note string `json:"note,omitempty"`
}

// Prepare implements jobs.Params.
func (p *Params) Prepare(jobs.Who) error { return nil }

// TaskType declares bench:noop.
func TaskType() jobs.Type {
	return jobs.Type{Name: Type, Description: "Does nothing; for measuring the task pipeline.", Queue: "bench", Submittable: true,
		Disabled:  true, // on only where a benchmark enables it
		NewParams: func() jobs.Params { return &Params{} },
		Policy:    jobs.Policy{MaxRetry: 0, RetryBase: time.Second, Timeout: 5 * time.Minute, MaxRuntime: time.Minute, StallAfter: time.Minute},
		Handler:   Handler{}}
}
