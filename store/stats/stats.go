// Package stats is the statistics of finished tasks (GET /api/v1/stats): counts, rows and
// duration percentiles by day, type, status and owner, over the live tasks and the daily
// aggregates (task_stats_daily) the archive keeps of the tasks it moved. It owns the duration
// histogram those aggregates hold: the archive folds tasks in with BucketCase and
// HistogramAgg, and Read reads the percentiles back. Package store's Store.Stats reads them
// over its pool.
package stats

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store/pg"
)

// DurationBuckets are the upper bounds, in seconds, of the duration histogram kept per day;
// the last bucket holds everything longer.
var DurationBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600}

// BucketCase is the SQL expression that turns a duration in seconds (d) into a 1-based bucket.
func BucketCase() string {
	var b strings.Builder
	b.WriteString("CASE")
	for i, ub := range DurationBuckets {
		fmt.Fprintf(&b, " WHEN d <= %g THEN %d", ub, i+1)
	}
	fmt.Fprintf(&b, " ELSE %d END", len(DurationBuckets)+1)
	return b.String()
}

// HistogramAgg is the aggregate that counts a group's rows per bucket b: an array with one
// element per bucket.
func HistogramAgg() string {
	parts := make([]string, len(DurationBuckets)+1)
	for i := range parts {
		parts[i] = fmt.Sprintf("count(*) FILTER (WHERE b = %d)", i+1)
	}
	return "ARRAY[" + strings.Join(parts, ", ") + "]::bigint[]"
}

// Filter selects and groups finished tasks for Stats.
type Filter struct {
	From, To time.Time // finished in [From, To); by UTC day
	// GroupBy lists the dimensions: any of day, type, status, owner (none: one total row).
	GroupBy []string
}

// Row is one group of finished tasks.
type Row struct {
	Day         string  `json:"day,omitempty"`
	Type        string  `json:"type,omitempty"`
	Status      string  `json:"status,omitempty"`
	Owner       string  `json:"owner,omitempty"`
	Tasks       int64   `json:"tasks"`
	RowsTotal   int64   `json:"rows_total"`
	RowsSuccess int64   `json:"rows_success"`
	RowsFailed  int64   `json:"rows_failed"`
	P50Seconds  float64 `json:"duration_p50_seconds"`
	P90Seconds  float64 `json:"duration_p90_seconds"`
	P99Seconds  float64 `json:"duration_p99_seconds"`
}

// Dimensions are the dimensions Read groups by.
var Dimensions = []string{"day", "type", "status", "owner"}

// Read aggregates finished tasks, archived and live, by day (UTC), type, status and owner.
// A user sees their own tasks; an admin everyone's. Durations are read from the histogram
// (DurationBuckets): a percentile is its bucket's upper bound.
func Read(ctx context.Context, db *bun.DB, f Filter, scope pg.Scope) ([]Row, error) {
	for _, g := range f.GroupBy {
		if !slices.Contains(Dimensions, g) {
			return nil, fmt.Errorf("stats: unknown dimension %q", g)
		}
	}
	var raw []struct {
		Day         time.Time `bun:"day"`
		Type        string    `bun:"type"`
		Status      string    `bun:"status"`
		Owner       string    `bun:"owner"`
		Tasks       int64     `bun:"tasks"`
		RowsTotal   int64     `bun:"rows_total"`
		RowsSuccess int64     `bun:"rows_success"`
		RowsFailed  int64     `bun:"rows_failed"`
		Durations   []int64   `bun:"durations,array"`
	}
	err := pg.All(ctx, db, db.DB, &raw, `
		SELECT day, type, status, owner, tasks, rows_total, rows_success, rows_failed, durations FROM task_stats_daily
		WHERE day >= ($1::timestamptz AT TIME ZONE 'UTC')::date AND day < ($2::timestamptz AT TIME ZONE 'UTC')::date
		  AND ($3 OR owner = $4)
		UNION ALL
		SELECT (finished_at AT TIME ZONE 'UTC')::date, type, status, owner, 1, total_count, success_count, failed_count,
		       ARRAY(SELECT CASE WHEN i = b THEN 1 ELSE 0 END FROM generate_series(1, `+fmt.Sprint(len(DurationBuckets)+1)+`) i)::bigint[]
		FROM (SELECT *, `+BucketCase()+` AS b FROM (SELECT *, EXTRACT(EPOCH FROM finished_at - COALESCE(started_at, created_at)) AS d
		      FROM tasks WHERE status IN `+task.TerminalSQL+` AND finished_at >= $1 AND finished_at < $2 AND ($3 OR owner = $4)) x) y`,
		f.From, f.To, scope.Admin, scope.Owner)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	type group struct {
		row  Row
		hist []int64
	}
	groups := map[string]*group{}
	for _, r := range raw {
		var key Row
		for _, g := range f.GroupBy {
			switch g {
			case "day":
				key.Day = r.Day.Format(time.DateOnly)
			case "type":
				key.Type = r.Type
			case "status":
				key.Status = r.Status
			case "owner":
				key.Owner = r.Owner
			}
		}
		k := key.Day + "\x00" + key.Type + "\x00" + key.Status + "\x00" + key.Owner
		g := groups[k]
		if g == nil {
			g = &group{row: key, hist: make([]int64, len(DurationBuckets)+1)}
			groups[k] = g
		}
		g.row.Tasks += r.Tasks
		g.row.RowsTotal += r.RowsTotal
		g.row.RowsSuccess += r.RowsSuccess
		g.row.RowsFailed += r.RowsFailed
		for i := range min(len(r.Durations), len(g.hist)) {
			g.hist[i] += r.Durations[i]
		}
	}
	out := make([]Row, 0, len(groups))
	for _, g := range groups {
		g.row.P50Seconds, g.row.P90Seconds, g.row.P99Seconds = percentile(g.hist, 0.5), percentile(g.hist, 0.9), percentile(g.hist, 0.99)
		out = append(out, g.row)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Day+a.Type+a.Status+a.Owner < b.Day+b.Type+b.Status+b.Owner
	})
	return out, nil
}

// percentile reads the p-th percentile from a histogram over DurationBuckets: the upper
// bound of the bucket it falls in (the last, open bucket reports its lower bound).
func percentile(hist []int64, p float64) float64 {
	var total int64
	for _, n := range hist {
		total += n
	}
	if total == 0 {
		return 0
	}
	want := int64(float64(total)*p + 0.999999)
	var seen int64
	for i, n := range hist {
		seen += n
		if seen >= want {
			if i < len(DurationBuckets) {
				return DurationBuckets[i]
			}
			return DurationBuckets[len(DurationBuckets)-1]
		}
	}
	return DurationBuckets[len(DurationBuckets)-1]
}
