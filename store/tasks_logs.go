package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/taskcenter/taskcenter/store/pg"
)

// LogQuery selects a page of a task's log, read from the newest line back.
type LogQuery struct {
	Attempt  int   // only this attempt's lines; 0: every attempt's
	Before   int64 // only lines older than this line id; 0: up to the newest
	Limit    int   // at most this many lines
	Archived bool  // read the archive's copy of the log
}

// LogPage returns the newest lines of a task's log that q selects, oldest first. Paging is
// by line id (the order lines were written in), so lines written while a reader pages never
// shift a page: the next page is the one Before the first line returned.
func (s *Tasks) LogPage(ctx context.Context, taskID int64, q LogQuery) ([]LogEntry, error) {
	var logs []LogEntry
	err := pg.All(ctx, s.db, s.db.DB, &logs, `SELECT `+logColumns+` FROM `+logTable(q.Archived)+`
		WHERE task_id = $1 AND ($2::int = 0 OR attempt = $2) AND ($3::bigint = 0 OR id < $3)
		ORDER BY id DESC LIMIT $4`, taskID, q.Attempt, q.Before, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("page the log of task %d: %w", taskID, err)
	}
	slices.Reverse(logs)
	return logs, nil
}

// LogLines returns up to limit lines of a task's log after line id after, oldest first: the
// whole log, read forward a page at a time (its download).
func (s *Tasks) LogLines(ctx context.Context, taskID int64, after int64, limit int, archived bool) ([]LogEntry, error) {
	var logs []LogEntry
	err := pg.All(ctx, s.db, s.db.DB, &logs, `SELECT `+logColumns+` FROM `+logTable(archived)+`
		WHERE task_id = $1 AND id > $2 ORDER BY id LIMIT $3`, taskID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read the log of task %d: %w", taskID, err)
	}
	return logs, nil
}

func logTable(archived bool) string {
	if archived {
		return "task_logs_archive"
	}
	return "task_logs"
}
