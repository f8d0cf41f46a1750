// Package schedules keeps the recurring tasks users define (the schedules table) and what
// each of their fires did (schedule_fires), so a slot fires once however many schedulers run
// (RecordFire). The schedulers and the fire handler are jobs/schedule. Package store embeds
// *Schedules in its Store, so callers write st.CreateSchedule(...).
package schedules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store/pg"
)

// Schedules keeps users' recurring tasks and their fires.
type Schedules struct{ db *bun.DB }

// New returns the schedules over db.
func New(db *bun.DB) *Schedules { return &Schedules{db: db} }

// Schedule is a recurring task a user defined.
type Schedule struct {
	bun.BaseModel `bun:"table:schedules"`

	ID         int64           `bun:"id,pk,autoincrement"`
	ScheduleNo string          `bun:"schedule_no"`
	Owner      string          `bun:"owner"`
	Type       string          `bun:"type"`
	Params     json.RawMessage `bun:"params,type:jsonb"`
	Priority   int             `bun:"priority"`
	Cron       string          `bun:"cron"`
	Timezone   string          `bun:"timezone"`
	Paused     bool            `bun:"paused"`
	// PausedReason says why the schedule paused itself; empty when paused by hand or running.
	PausedReason string     `bun:"paused_reason,nullzero"`
	LastFiredAt  *time.Time `bun:"last_fired_at"`
	LastTaskNo   string     `bun:"last_task_no,nullzero"`
	LastOutcome  string     `bun:"last_outcome,nullzero"`
	CreatedAt    time.Time  `bun:"created_at"`
	UpdatedAt    time.Time  `bun:"updated_at"`
}

const columns = `id, schedule_no, owner, type, params, priority, cron, timezone, paused, paused_reason, last_fired_at, last_task_no,
	last_outcome, created_at, updated_at`

// Schedule errors callers branch on.
var (
	// ErrNotFound: no such schedule, or not visible to the caller.
	ErrNotFound = errors.New("schedule not found")
	// ErrTooMany: the owner already keeps as many schedules as one owner may.
	ErrTooMany = errors.New("too many schedules")
)

// NewSchedule is what a user gives to create a schedule.
type NewSchedule struct {
	ScheduleNo string
	Owner      string
	Type       string
	Params     json.RawMessage
	Priority   int
	Cron       string
	Timezone   string
	// MaxPerOwner refuses the schedule with ErrTooMany when its owner already keeps this many
	// (0: no cap). Concurrent creates of one owner are serialised, so the cap holds.
	MaxPerOwner int
}

// CreateSchedule stores a new schedule.
func (s *Schedules) CreateSchedule(ctx context.Context, ns NewSchedule) (*Schedule, error) {
	params := string(ns.Params)
	if params == "" {
		params = "{}"
	}
	sc := new(Schedule)
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if ns.MaxPerOwner > 0 {
			var kept int
			// One owner's creates queue behind this lock, so two at once cannot both pass the count.
			if _, err := pg.Exec(ctx, tx.Tx, `SELECT pg_advisory_xact_lock(hashtext('schedules:' || $1))`, ns.Owner); err != nil {
				return err
			}
			if err := tx.Tx.QueryRowContext(ctx, `SELECT count(*) FROM schedules WHERE owner = $1`, ns.Owner).Scan(&kept); err != nil {
				return err
			}
			if kept >= ns.MaxPerOwner {
				return ErrTooMany
			}
		}
		return pg.One(ctx, s.db, tx.Tx, sc, `INSERT INTO schedules (schedule_no, owner, type, params, priority, cron, timezone)
			VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7) RETURNING `+columns,
			ns.ScheduleNo, ns.Owner, ns.Type, params, ns.Priority, ns.Cron, ns.Timezone)
	})
	if errors.Is(err, ErrTooMany) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("create schedule: %w", err)
	}
	return sc, nil
}

// GetSchedule returns a schedule by its public number, if scope may see it.
func (s *Schedules) GetSchedule(ctx context.Context, scheduleNo string, scope pg.Scope) (*Schedule, error) {
	return pg.Get[Schedule](ctx, s.db, ErrNotFound, fmt.Sprintf("get schedule %s", scheduleNo),
		`SELECT `+columns+` FROM schedules WHERE schedule_no = $1 AND ($2 OR owner = $3)`,
		scheduleNo, scope.Admin, scope.Owner)
}

// GetScheduleByID returns a schedule by its internal id (the fire handler's lookup).
func (s *Schedules) GetScheduleByID(ctx context.Context, id int64) (*Schedule, error) {
	return pg.Get[Schedule](ctx, s.db, ErrNotFound, fmt.Sprintf("get schedule %d", id),
		`SELECT `+columns+` FROM schedules WHERE id = $1`, id)
}

// ListSchedules returns the schedules scope may see (an admin: all, or one owner's), oldest
// first.
func (s *Schedules) ListSchedules(ctx context.Context, scope pg.Scope, owner string) ([]Schedule, error) {
	owner = scope.ListedOwner(owner)
	return pg.List[Schedule](ctx, s.db, "list schedules",
		`SELECT `+columns+` FROM schedules WHERE ($1 = '' OR owner = $1) ORDER BY id LIMIT 1000`, owner)
}

// PauseSchedule pauses or resumes a schedule by hand (either clears why it paused itself).
func (s *Schedules) PauseSchedule(ctx context.Context, scheduleNo string, scope pg.Scope, paused bool) (*Schedule, error) {
	return pg.Get[Schedule](ctx, s.db, ErrNotFound, fmt.Sprintf("pause schedule %s", scheduleNo),
		`UPDATE schedules SET paused = $4, paused_reason = NULL,
		resumed_at = CASE WHEN $4 THEN resumed_at ELSE now() END, updated_at = now()
		WHERE schedule_no = $1 AND ($2 OR owner = $3) RETURNING `+columns, scheduleNo, scope.Admin, scope.Owner, paused)
}

// DeleteSchedule deletes a schedule; a fire already queued for it finds nothing and does
// nothing.
func (s *Schedules) DeleteSchedule(ctx context.Context, scheduleNo string, scope pg.Scope) error {
	return pg.ChangeOne(ctx, s.db.DB, ErrNotFound, fmt.Sprintf("delete schedule %s", scheduleNo),
		`DELETE FROM schedules WHERE schedule_no = $1 AND ($2 OR owner = $3)`, scheduleNo, scope.Admin, scope.Owner)
}

// ActiveSchedules returns every schedule that is not paused: what the schedulers fire.
func (s *Schedules) ActiveSchedules(ctx context.Context) ([]Schedule, error) {
	return pg.List[Schedule](ctx, s.db, "list active schedules",
		`SELECT `+columns+` FROM schedules WHERE NOT paused ORDER BY id`)
}

// RecordFire records what a schedule's fire for slot did, once per slot: it returns false
// when the slot was already recorded (another scheduler's fire got there first).
func (s *Schedules) RecordFire(ctx context.Context, scheduleID int64, slot time.Time, taskNo, outcome string) (bool, error) {
	n, err := pg.Exec(ctx, s.db.DB, `
		WITH f AS (
			INSERT INTO schedule_fires (schedule_id, slot, task_no, outcome) VALUES ($1, $2, NULLIF($3, ''), $4)
			ON CONFLICT (schedule_id, slot) DO NOTHING RETURNING schedule_id
		)
		UPDATE schedules SET last_fired_at = $2, last_task_no = COALESCE(NULLIF($3, ''), last_task_no), last_outcome = $4
		WHERE id IN (SELECT schedule_id FROM f) AND (last_fired_at IS NULL OR last_fired_at <= $2)`,
		scheduleID, slot.UTC(), taskNo, outcome)
	if err != nil {
		return false, fmt.Errorf("record schedule fire: %w", err)
	}
	return n == 1, nil
}

// PauseItself pauses a running schedule saying why (its runs kept failing); it reports
// false when the schedule was already paused or is gone.
func (s *Schedules) PauseItself(ctx context.Context, id int64, reason string) (bool, error) {
	n, err := pg.Exec(ctx, s.db.DB, `UPDATE schedules SET paused = true, paused_reason = $2, updated_at = now()
		WHERE id = $1 AND NOT paused`, id, reason)
	if err != nil {
		return false, fmt.Errorf("pause schedule %d: %w", id, err)
	}
	return n == 1, nil
}

// Run is how one task a schedule's fire created stands.
type Run struct {
	TaskNo       string      `bun:"task_no"`
	Status       task.Status `bun:"status"`
	ErrorMessage string      `bun:"error_message"`
}

// LastRuns returns the tasks the schedule's latest n fires since it was last resumed created,
// newest first, as far as they are still in the live tables (an archived one is left out).
func (s *Schedules) LastRuns(ctx context.Context, scheduleID int64, n int) ([]Run, error) {
	return pg.List[Run](ctx, s.db, fmt.Sprintf("last runs of schedule %d", scheduleID),
		`SELECT t.task_no, t.status, COALESCE(t.error_message, '') AS error_message
		FROM (SELECT f.task_no, f.slot FROM schedule_fires f JOIN schedules sc ON sc.id = f.schedule_id
		      WHERE f.schedule_id = $1 AND f.task_no IS NOT NULL AND f.fired_at > COALESCE(sc.resumed_at, '-infinity')
		      ORDER BY f.slot DESC LIMIT $2) f
		JOIN tasks t ON t.task_no = f.task_no ORDER BY f.slot DESC`, scheduleID, n)
}

// Fire is one recorded fire.
type Fire struct {
	Slot    time.Time `bun:"slot"`
	TaskNo  string    `bun:"task_no,nullzero"`
	Outcome string    `bun:"outcome"`
	FiredAt time.Time `bun:"fired_at"`
}

// ScheduleFires returns a schedule's latest fires, newest first.
func (s *Schedules) ScheduleFires(ctx context.Context, scheduleID int64, limit int) ([]Fire, error) {
	return pg.List[Fire](ctx, s.db, "list schedule fires",
		`SELECT slot, task_no, outcome, fired_at FROM schedule_fires WHERE schedule_id = $1
		ORDER BY slot DESC LIMIT $2`, scheduleID, limit)
}
