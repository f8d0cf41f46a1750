package schedules

import (
	"reflect"
	"testing"

	"github.com/taskcenter/taskcenter/store/internal/columntest"
)

// The schedules' statements are tested through the schedulers that run them (jobs/schedule)
// and end to end (cmd/taskcenter's schedule_e2e_test.go).

// The column list the statements name is exactly the model's columns, in model order.
func TestColumnListsMatchModels(t *testing.T) {
	t.Parallel()
	columntest.Check(t, map[reflect.Type]string{reflect.TypeFor[Schedule](): columns})
}
