package config

import "time"

// Schedules bounds what users may schedule, so no one user's recurring tasks can flood the
// queues, the webhooks or the disk.
type Schedules struct {
	// MinInterval is the shortest time between two fires of one schedule a user may ask for:
	// a cron spec or @every that fires more often is refused (422). An admin may lower it for
	// one schedule (its min_interval field). Default 5m.
	MinInterval time.Duration `yaml:"min_interval"`
	// MaxPerOwner is how many schedules one owner may keep; creating one more answers 409
	// too_many_schedules. 0 means no cap. Default 20.
	MaxPerOwner int `yaml:"max_per_owner"`
	// PauseAfterFailures pauses a schedule whose last this many runs all ended FAILED or
	// TIMEOUT, saying why (paused_reason), until its owner resumes it. 0 never pauses.
	// Default 5.
	PauseAfterFailures int `yaml:"pause_after_failures"`
}

func defaultSchedules() Schedules {
	return Schedules{MinInterval: 5 * time.Minute, MaxPerOwner: 20, PauseAfterFailures: 5}
}

// validate checks the interval and the caps.
func (s Schedules) validate(bad func(string, ...any)) {
	if s.MinInterval < time.Second {
		bad("schedules.min_interval must be at least 1s, got %s", s.MinInterval)
	}
	if s.MaxPerOwner < 0 {
		bad("schedules.max_per_owner must be 0 (no cap) or positive, got %d", s.MaxPerOwner)
	}
	if s.PauseAfterFailures < 0 {
		bad("schedules.pause_after_failures must be 0 (never) or positive, got %d", s.PauseAfterFailures)
	}
}
