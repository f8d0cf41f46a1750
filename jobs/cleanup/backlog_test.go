package cleanup_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
)

// backlogAlerts is a BacklogAlerter that keeps every alert.
type backlogAlerts struct {
	testenv.Collector[backlogAlert]
}

type backlogAlert struct {
	queue              string
	waiting, threshold int
}

func (b *backlogAlerts) BacklogHigh(_ context.Context, queue string, waiting, threshold int, _ time.Time) {
	b.Add(backlogAlert{queue, waiting, threshold})
}

func (b *backlogAlerts) sent() []backlogAlert { return b.Since(0) }

// A queue whose waiting tasks stay over the threshold for BacklogFor raises one alert per
// episode: none before it has held that long, one when it has, none while it goes on. Once
// the queue drains the episode ends, so the next one alerts again. A threshold of 0 turns the
// check off.
func TestRoundAlertsOncePerBacklogEpisode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	ctx := context.Background()
	backlog := func() {
		for range 3 {
			f.task(`{}`) // PENDING in the queue exports
		}
	}
	held := func() { f.Exec("UPDATE alert_conditions SET active_since = now() - interval '10 minutes'") }
	backlog()

	if rep := f.cleaner.Round(ctx); rep.BacklogAlerts != 0 || f.Count("SELECT count(*) FROM alert_conditions") != 0 {
		t.Fatalf("report = %+v with no backlog threshold, want the check off", rep)
	}

	cfg := f.cfg
	cfg.BacklogThreshold, cfg.BacklogFor, cfg.Queues = 2, 5*time.Minute, []string{"exports"}
	alerts := &backlogAlerts{}
	c := f.cleanerWith(cfg, cleanup.Deps{Alerter: alerts})
	var fired []int
	round := func() { fired = append(fired, c.Round(ctx).BacklogAlerts) }
	round() // over the threshold, not yet for BacklogFor
	held()
	round() // held for 10 minutes: alert
	round() // the same episode: no second alert
	f.Exec("DELETE FROM tasks WHERE queue = 'exports'")
	round() // drained: the episode ends
	if n := f.Count("SELECT count(*) FROM alert_conditions"); n != 0 {
		t.Fatalf("%d alert conditions left after the queue drained, want the episode ended", n)
	}
	backlog()
	round()
	held()
	round() // a new episode: alert again
	if want := []int{0, 1, 0, 0, 0, 1}; !slices.Equal(fired, want) {
		t.Fatalf("backlog alerts per round = %v, want %v", fired, want)
	}
	want := backlogAlert{queue: "exports", waiting: 3, threshold: 2}
	if got := alerts.sent(); len(got) != 2 || got[0] != want || got[1] != want {
		t.Fatalf("alerts sent = %+v, want two of %+v", got, want)
	}
}
