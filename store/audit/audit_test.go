package audit

import (
	"reflect"
	"testing"

	"github.com/taskcenter/taskcenter/store/internal/columntest"
)

// The rows the store's own statements write with a change (submit, cancel, retry, a token's
// creation and revocation) are tested where those statements live: store's records_test.go and
// store/tokens.

// The column list the statements name is exactly the model's columns, in model order.
func TestColumnListsMatchModels(t *testing.T) {
	t.Parallel()
	columntest.Check(t, map[reflect.Type]string{reflect.TypeFor[Event](): columns})
}
