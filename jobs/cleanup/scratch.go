package cleanup

import (
	"context"
	"time"

	"github.com/taskcenter/taskcenter/internal/every"
	"github.com/taskcenter/taskcenter/internal/storage"
)

// SweepScratch deletes this node's scratch entries (storage.Store.TempDir) older than
// TempTTL that no running attempt is writing. An entry's name starts with the task number
// and attempt of its writer (storage.AttemptPrefix). Scratch is local to each node, so every
// node runs this (the round on the node that runs it, and ScratchSweeper on every worker and
// API process).
func (c *Cleaner) SweepScratch(ctx context.Context) (int, error) {
	return c.sweepListed(ctx, func(add func(string) error) error {
		return c.files.ListTemp(time.Now().Add(-c.cfg.TempTTL), func(name string, _ time.Time) error { return add(name) })
	}, c.scratchInUse, c.files.RemoveTemp)
}

// scratchInUse answers which of the scratch entries names a running attempt is writing.
func (c *Cleaner) scratchInUse(ctx context.Context, names []string) (map[string]bool, error) {
	taskNos := make([]string, 0, len(names))
	for _, name := range names {
		taskNo, _ := storage.TempOwner(name)
		taskNos = append(taskNos, taskNo)
	}
	running, err := c.store.RunningAttempts(ctx, taskNos)
	if err != nil {
		return nil, err
	}
	inUse := make(map[string]bool)
	for _, name := range names {
		taskNo, attempt := storage.TempOwner(name)
		if live, ok := running[taskNo]; ok && (attempt == 0 || attempt == live) {
			inUse[name] = true
		}
	}
	return inUse, nil
}

// ScratchSweeper runs SweepScratch on this node every interval. Scratch files (partial
// exports, spilled shared strings, error reports rendered for one download) are local to
// each node, and a cleanup round runs on one node per slot, so every process sweeps its own:
// with the s3 backend no node sees another's scratch.
type ScratchSweeper struct {
	c     *Cleaner
	every time.Duration
	stop  context.CancelFunc
	done  chan struct{}
}

// ScratchInterval is how often a node sweeps its scratch for a given TempTTL: a quarter of
// it, between a minute and an hour.
func ScratchInterval(tempTTL time.Duration) time.Duration {
	return min(max(tempTTL/4, time.Minute), time.Hour)
}

// NewScratchSweeper returns a sweeper of c's scratch dir; Start runs it.
func NewScratchSweeper(c *Cleaner, every time.Duration) *ScratchSweeper {
	return &ScratchSweeper{c: c, every: every}
}

// Start sweeps now and then every interval until Stop.
func (s *ScratchSweeper) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		every.Run(ctx, s.every, func(ctx context.Context) {
			if n, err := s.c.SweepScratch(ctx); err != nil && ctx.Err() == nil {
				s.c.logger.Warn("scratch sweep failed", "err", err)
			} else if n > 0 {
				s.c.logger.Info("scratch sweep", "deleted", n)
			}
		})
	}()
}

// Stop ends the sweeper and waits for it.
func (s *ScratchSweeper) Stop() {
	if s.stop == nil {
		return
	}
	s.stop()
	<-s.done
}
