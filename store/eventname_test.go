package store_test

import (
	"context"
	"testing"

	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// The outbox names events with the SQL form of task.EventName: both must agree for every
// status, cancel requested or not, since live streams and webhooks compare names.
func TestTheOutboxNamesEventsAsTheDomainDoes(t *testing.T) {
	t.Parallel()
	pg := storetest.NewPostgres(t)
	for _, st := range task.AllStatuses {
		for _, cancel := range []bool{false, true} {
			var got string
			err := pg.DB.DB.QueryRowContext(context.Background(),
				"SELECT "+task.EventNameSQL("s", "c")+" FROM (SELECT $1::text AS s, $2::bool AS c) v", string(st), cancel).Scan(&got)
			if err != nil {
				t.Fatal(err)
			}
			if want := task.EventName(st, cancel); got != want {
				t.Fatalf("%s (cancel requested %v): SQL names it %q, the domain %q", st, cancel, got, want)
			}
		}
	}
}
