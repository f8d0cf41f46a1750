package cleanup

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/store"
)

// resultGrace is the youngest a result file must be before the sweep looks at it: whether it
// is dead is decided by the task row, so a short grace suffices.
const resultGrace = time.Minute

// resultsCursor is where the orphan-results sweep continues: after this key, wrapping around.
// The lock lets rounds that overlap in one process share it.
type resultsCursor struct {
	mu    sync.Mutex
	after string
}

func (r *resultsCursor) get() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.after
}

func (r *resultsCursor) set(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.after = key
}

// orphanResults deletes result files no task row points at: the output of an attempt that
// was killed after storing its file and before recording it. A file is kept while its
// attempt is still RUNNING (it may be about to record it); once the task has moved on, that
// attempt can never record it. Files younger than a minute (or TempTTL) are left alone. The
// results area holds every live result, so each round looks at the next BatchSize·4 keys
// after where the previous round stopped, wrapping around.
func (c *Cleaner) orphanResults(ctx context.Context) (int, error) {
	var keys []string // every result old enough to judge (key names only)
	err := c.files.List(ctx, storage.Results+"/", time.Now().Add(-min(c.cfg.TempTTL, resultGrace)), func(i storage.Info) error {
		if _, _, ok := storage.ResultOwner(i.Key); ok && !strings.Contains(strings.TrimPrefix(i.Key, storage.Results+"/"), "/") {
			keys = append(keys, i.Key) // others are not names this service writes: left alone
		}
		return nil
	})
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	slices.Sort(keys)
	after := c.results.get()
	start := sort.SearchStrings(keys, after)
	if start < len(keys) && keys[start] == after {
		start++
	}
	var rels []string
	var taskNos []string
	last := ""
	for k := 0; k < len(keys) && len(rels) < 4*c.cfg.BatchSize; k++ {
		key := keys[(start+k)%len(keys)] // from the cursor to the end, then from the start
		last = key
		taskNo, _, _ := storage.ResultOwner(key)
		rels = append(rels, key)
		taskNos = append(taskNos, taskNo)
	}
	c.results.set(last)
	refs, err := c.store.ResultRefs(ctx, taskNos)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rel := range rels {
		taskNo, attempt, _ := storage.ResultOwner(rel)
		ref, exists := refs[taskNo]
		switch {
		case exists && (ref.File == rel || ref.ErrorReport == rel):
			continue
		case exists && ref.Status == store.StatusRunning && ref.Attempt == attempt:
			continue
		}
		// The task moved on without recording the file, or was deleted by retention.
		if err := c.files.Delete(ctx, rel); err != nil {
			return n, err
		}
		c.logger.Info("deleted a result file no task records", "file", rel)
		n++
	}
	return n, nil
}
