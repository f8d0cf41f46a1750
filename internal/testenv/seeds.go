package testenv

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// RunModelSeeds runs a randomized model test's seeds, spread over shards that run in
// parallel: each shard builds its world once with newShard and runs its seeds in turn on
// what newShard returns, stopping at the first failure.
//
// TASKCENTER_MODEL_SEEDS sets how many seeds (default 200), TASKCENTER_MODEL_FIRST_SEED the
// first (default 1); TASKCENTER_MODEL_SEED replays that one seed alone, in the first shard.
func RunModelSeeds(t *testing.T, shards int, newShard func(t *testing.T) (runSeed func(seed uint64))) {
	t.Helper()
	seeds := modelEnvInt("TASKCENTER_MODEL_SEEDS", 200)
	first := uint64(modelEnvInt("TASKCENTER_MODEL_FIRST_SEED", 1))
	var only []uint64
	if s := os.Getenv("TASKCENTER_MODEL_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TASKCENTER_MODEL_SEED=%q", s)
		}
		only = []uint64{n}
	}
	for shard := range shards {
		t.Run(fmt.Sprintf("shard%d", shard), func(t *testing.T) {
			t.Parallel()
			if only != nil && shard > 0 {
				return
			}
			runSeed := newShard(t)
			if only != nil {
				runSeed(only[0])
				return
			}
			for i := shard; i < seeds; i += shards {
				if t.Failed() {
					return
				}
				runSeed(first + uint64(i))
			}
		})
	}
}

func modelEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
