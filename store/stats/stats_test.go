package stats_test

import (
	"context"
	"testing"
	"time"

	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/taskcenter/taskcenter/store/pg"
	"github.com/taskcenter/taskcenter/store/stats"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// The daily aggregates are grouped as asked and kept to the caller's tasks, and a percentile
// is the upper bound of its histogram bucket (the open last bucket reports its lower bound).
func TestStatsGroupTheDailyAggregatesAndReadPercentilesFromTheHistogram(t *testing.T) {
	t.Parallel()
	db := storetest.NewPostgres(t).DB
	ctx := context.Background()
	day := time.Now().UTC().Truncate(24 * time.Hour)
	hist := func(counts map[int]int64) []int64 {
		h := make([]int64, len(stats.DurationBuckets)+1)
		for i, n := range counts {
			h[i] = n
		}
		return h
	}
	last := len(stats.DurationBuckets)
	for _, r := range []struct {
		status, owner    string
		tasks, ok, fails int64
		durations        []int64
	}{
		{"SUCCESS", "alice", 3, 30, 0, hist(map[int]int64{0: 2, 8: 1})}, // 0.1 s twice, 60 s once
		{"FAILED", "alice", 1, 5, 5, hist(map[int]int64{0: 1})},
		{"SUCCESS", "bob", 1, 10, 0, hist(map[int]int64{last: 1})}, // longer than the last bound
	} {
		storetest.Exec(t, db, `INSERT INTO task_stats_daily (day, type, status, owner, tasks, rows_total, rows_success, rows_failed, durations)
			VALUES (?, 'import:customers', ?, ?, ?, ?, ?, ?, ?)`,
			day, r.status, r.owner, r.tasks, r.ok+r.fails, r.ok, r.fails, pgdialect.Array(r.durations))
	}
	f := stats.Filter{From: day, To: day.Add(24 * time.Hour), GroupBy: []string{"status"}}

	rows, err := stats.Read(ctx, db, f, pg.Scope{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	want := []stats.Row{
		{Status: "FAILED", Tasks: 1, RowsTotal: 10, RowsSuccess: 5, RowsFailed: 5, P50Seconds: 0.1, P90Seconds: 0.1, P99Seconds: 0.1},
		{Status: "SUCCESS", Tasks: 3, RowsTotal: 30, RowsSuccess: 30, P50Seconds: 0.1, P90Seconds: 60, P99Seconds: 60},
	}
	if len(rows) != len(want) || rows[0] != want[0] || rows[1] != want[1] {
		t.Fatalf("alice's stats by status = %+v, want %+v", rows, want)
	}

	rows, err = stats.Read(ctx, db, stats.Filter{From: f.From, To: f.To, GroupBy: []string{"owner"}}, pg.Scope{Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Owner != "alice" || rows[0].Tasks != 4 || rows[1].Owner != "bob" || rows[1].P50Seconds != 6*3600 {
		t.Fatalf("everyone's stats by owner = %+v", rows)
	}

	if _, err := stats.Read(ctx, db, stats.Filter{From: f.From, To: f.To, GroupBy: []string{"colour"}}, pg.Scope{Admin: true}); err == nil {
		t.Fatal("grouped by an unknown dimension")
	}
}
