package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/taskcenter/taskcenter/store/pg"
)

// This file holds the alerts: a failed task's alert, sent by whoever claims it so it goes out
// once, and the alert conditions, each of which fires once per episode.

// ClaimAlert records that the failure alert of a task is being sent, and returns the task
// when this caller is the one to send it: at most one caller ever gets it.
func (s *Alerts) ClaimAlert(ctx context.Context, taskID int64) (*Task, error) {
	task := new(Task)
	err := pg.One(ctx, s.db, s.db.DB, task, `
		UPDATE tasks SET alerted_at = now()
		WHERE id = $1 AND alert_due_at IS NOT NULL AND alerted_at IS NULL
		RETURNING `+taskColumns, taskID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim alert of task %d: %w", taskID, err)
	}
	return task, nil
}

// ClaimDueAlerts claims up to limit failure alerts that became due more than olderThan ago
// and were never sent (the process that failed the task died before sending). The caller
// sends them.
func (s *Alerts) ClaimDueAlerts(ctx context.Context, olderThan time.Duration, limit int) ([]Task, error) {
	return pg.List[Task](ctx, s.db, "claim due alerts", `
		UPDATE tasks SET alerted_at = now()
		WHERE id IN (`+sqlDueAlerts+` FOR UPDATE SKIP LOCKED)
		RETURNING `+taskColumns, olderThan.Seconds(), limit)
}

// ConditionHolds records that an alert condition holds. It returns the time it started and
// fire=true exactly once per episode: the first call after it has held for at least hold.
func (s *Alerts) ConditionHolds(ctx context.Context, key string, hold time.Duration) (since time.Time, fire bool, err error) {
	if _, err := pg.Exec(ctx, s.db.DB, `INSERT INTO alert_conditions (key) VALUES ($1) ON CONFLICT (key) DO NOTHING`, key); err != nil {
		return time.Time{}, false, fmt.Errorf("record alert condition: %w", err)
	}
	var fired []time.Time
	err = pg.All(ctx, s.db, s.db.DB, &fired, `UPDATE alert_conditions SET fired_at = now()
		WHERE key = $1 AND fired_at IS NULL AND active_since <= now() - make_interval(secs => $2) RETURNING active_since`,
		key, hold.Seconds())
	if err != nil {
		return time.Time{}, false, fmt.Errorf("fire alert condition: %w", err)
	}
	if len(fired) == 1 {
		return fired[0], true, nil
	}
	return time.Time{}, false, nil
}

// ConditionCleared forgets an alert condition, so its next episode alerts again.
func (s *Alerts) ConditionCleared(ctx context.Context, key string) error {
	_, err := pg.Exec(ctx, s.db.DB, `DELETE FROM alert_conditions WHERE key = $1`, key)
	return err
}
