package cleanup

import (
	"context"
	"time"

	"github.com/taskcenter/taskcenter/internal/every"
)

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
