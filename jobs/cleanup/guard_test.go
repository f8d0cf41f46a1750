package cleanup_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
	"github.com/taskcenter/taskcenter/store"
)

// reports is an Observer that keeps every round's report: the round's own account of which
// steps it ran, one report per round that ran.
type reports struct {
	testenv.Collector[cleanup.Report]
}

func (r *reports) CleanupRound(rep cleanup.Report) { r.Add(rep) }

func (r *reports) count() int { return r.Len() }

// since returns the reports received after the first n.
func (r *reports) since(n int) []cleanup.Report { return r.Since(n) }

// fixedSlot is a schedule whose only activation is the time last set, so a test chooses the
// slot ProcessTask claims instead of depending on the wall clock's minute.
type fixedSlot struct{ at atomic.Pointer[time.Time] }

func (s *fixedSlot) set(at time.Time) { s.at.Store(&at) }

func (s *fixedSlot) Next(t time.Time) time.Time {
	if at := *s.at.Load(); t.Before(at) {
		return at
	}
	return time.Time{}
}

// replica builds another cleaner over the fixture's database, Redis and files, as a second
// scheduler replica runs it: its own name and its own Postgres connection pool, so the two
// claims race on separate sessions as they do between processes.
func (f *fixture) replica(name string, cfg cleanup.Config, obs cleanup.Observer) *cleanup.Cleaner {
	f.T.Helper()
	db, err := store.Open(f.pg.URL, store.OpenOptions{MaxOpenConns: 4})
	if err != nil {
		f.T.Fatal(err)
	}
	f.T.Cleanup(func() { db.Close() })
	return cleanup.New(cfg, name, cleanup.Deps{Store: store.New(db), Enqueuer: f.enq, Files: f.files, Observer: obs, Logger: f.logger})
}

// Two replicas whose schedulers both deliver the same slot race to claim it; only the winner
// may run the round. The cleanup_rounds row cannot show that (the claim's insert leaves one
// row whoever wins), and the steps' own effects are idempotent (a second round finds nothing
// left to do), so the test counts what every round that runs produces: its report to the
// observer, with one duration per step it ran. Each slot also has an orphan waiting, so the
// round that ran is seen doing real work: exactly one job per slot reaches asynq.
func TestGuardRunsARacedSlotOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10)
	ctx := t.Context()
	slot := &fixedSlot{}
	cfg := f.cfg
	cfg.Schedule = slot
	seenA, seenB := &reports{}, &reports{}
	replicas := []struct {
		name string
		c    *cleanup.Cleaner
		seen *reports
	}{
		{"replica-a", f.replica("replica-a", cfg, seenA), seenA},
		{"replica-b", f.replica("replica-b", cfg, seenB), seenB},
	}

	const slots = 20
	// Slots in the past (a slot is the latest activation at or before now), one minute apart,
	// recent enough that finishing a round does not prune them as older than a week.
	base := time.Now().Add(-time.Hour).Truncate(time.Minute)
	for i := range slots {
		at := base.Add(time.Duration(i) * time.Minute)
		slot.set(at)
		orphan := f.task(`{}`)
		f.Exec("UPDATE tasks SET enqueued_at = NULL WHERE id = ?", orphan.ID)
		beforeA, beforeB := seenA.count(), seenB.count()

		// Both deliveries are released together, so the claims meet in Postgres.
		var ready, done sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, len(replicas))
		for j, r := range replicas {
			ready.Add(1)
			done.Go(func() {
				ready.Done()
				<-start
				errs[j] = r.c.ProcessTask(ctx, asynq.NewTask(cleanup.Type, nil))
			})
		}
		ready.Wait()
		close(start)
		done.Wait()
		for j, err := range errs {
			if err != nil {
				t.Fatalf("slot %d: %s: %v", i, replicas[j].name, err)
			}
		}

		// ProcessTask runs the round before it returns: every round of this slot has reported.
		ranA, ranB := seenA.since(beforeA), seenB.since(beforeB)
		steps := map[string]int{}
		for _, rep := range append(ranA, ranB...) {
			for name := range rep.TookMS {
				steps[name]++
			}
		}
		if len(ranA)+len(ranB) != 1 {
			t.Fatalf("slot %d of %d: the round ran %d times (replica-a %d, replica-b %d), want once; runs per step: %v",
				i, slots, len(ranA)+len(ranB), len(ranA), len(ranB), steps)
		}
		for name, n := range steps {
			if n != 1 {
				t.Fatalf("slot %d: step %s ran %d times, want once: %v", i, name, n, steps)
			}
		}
		winner, rep := replicas[0].name, ranA
		if len(ranB) == 1 {
			winner, rep = replicas[1].name, ranB
		}
		if len(steps) == 0 || rep[0].Orphans != 1 || rep[0].Errors != 0 {
			t.Fatalf("slot %d: %s's round = %+v, want every step run, the slot's orphan enqueued and no errors", i, winner, rep[0])
		}
		if info, err := f.insp.GetQueueInfo("exports"); err != nil || info.Pending != i+1 {
			t.Fatalf("slot %d: asynq queue = %+v (%v), want %d jobs: one orphan handed over per slot", i, info, err, i+1)
		}

		// The slot is recorded once, under the replica that ran it, and finished.
		rounds, err := f.S.CleanupRounds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rounds) != i+1 {
			t.Fatalf("slot %d: %d rounds recorded, want %d", i, len(rounds), i+1)
		}
		got := rounds[i]
		if !got.Slot.Equal(at) || got.Worker != winner || got.FinishedAt == nil {
			t.Fatalf("slot %d: recorded %s by %s finished=%v, want %s by %s, finished", i, got.Slot, got.Worker, got.FinishedAt != nil, at, winner)
		}
	}
	// Which replica wins varies from slot to slot; together they ran one round per slot.
	if n := seenA.count() + seenB.count(); n != slots {
		t.Fatalf("%d rounds ran for %d slots", n, slots)
	}
	t.Logf("rounds won: replica-a %d, replica-b %d", seenA.count(), seenB.count())
}

func TestSlotIsTheLatestActivation(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 12, 34, 56, 0, time.UTC) // a Saturday
	for spec, want := range map[string]time.Time{
		"* * * * *":    time.Date(2026, 11, 28, 12, 34, 0, 0, time.UTC),
		"*/15 * * * *": time.Date(2026, 11, 28, 12, 30, 0, 0, time.UTC),
		"0 9 * * 1-5":  time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC),
		"@hourly":      time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC),
		"@every 30s":   time.Date(2026, 11, 28, 12, 34, 30, 0, time.UTC),
	} {
		s, err := cleanup.ParseSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := cleanup.Slot(s, at); !got.Equal(want) {
			t.Errorf("Slot(%q, %s) = %s, want %s", spec, at, got, want)
		}
		if got := cleanup.Slot(s, at.Add(-time.Nanosecond).Add(time.Nanosecond)); !got.Equal(want) {
			t.Errorf("Slot(%q) is not stable", spec)
		}
	}
}

func TestGuardRunsASlotOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10)
	for range 3 {
		if err := f.cleaner.ProcessTask(context.Background(), asynq.NewTask(cleanup.Type, nil)); err != nil {
			t.Fatal(err)
		}
	}
	rounds, err := f.S.CleanupRounds(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Three deliveries within one minute's slot (or two, straddling a minute boundary).
	if len(rounds) == 0 || len(rounds) > 2 || rounds[0].FinishedAt == nil {
		t.Fatalf("rounds = %+v, want the slot recorded once and finished", rounds)
	}
	// The row alone cannot tell a guarded delivery from one that ran anyway (the insert is
	// ON CONFLICT DO NOTHING either way): the round itself must have run once per slot.
	if n := f.seen.count(); n != len(rounds) {
		t.Fatalf("%d rounds ran for %d slots, want one per slot", n, len(rounds))
	}
}
