package export

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// A filter that fails Validate in the worker (a task submitted before the rules existed) is
// bad input: the runtime fails the task at once, no retry, no alert.
func TestInvalidFilterIsBadInputForTheWorker(t *testing.T) {
	t.Parallel()
	year0 := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, err := range map[string]error{
		"tasks":     TaskFilter{CreatedFrom: &year0, Owner: "a\x00"}.Validate(),
		"customers": CustomerFilter{Level: "bronze"}.Validate(),
	} {
		var bad *jobs.BadInputError
		if !errors.As(err, &bad) || bad.Code != "bad_filter" {
			t.Fatalf("%s: %v is not bad input", name, err)
		}
		var ferr *FilterError
		if !errors.As(err, &ferr) || len(ferr.Fields) == 0 {
			t.Fatalf("%s: %v does not list its fields", name, err)
		}
	}
}

func TestFilterBounds(t *testing.T) {
	t.Parallel()
	at := func(s string) *time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &tm
	}
	ok := []TaskFilter{
		{},
		{CreatedFrom: at("1970-01-01T00:00:00Z"), CreatedTo: at("9999-12-31T23:59:59Z")},
		{Statuses: []store.Status{store.StatusFailed}, Types: []string{"?", "$1", "a::b", `\`}, Owner: "o'brien"},
		{Search: strings.Repeat("名", MaxSearch)},
		{Search: `100%_\`},
	}
	for _, f := range ok {
		if err := f.Validate(); err != nil {
			t.Errorf("%+v: %v", f, err)
		}
	}
	bad := map[string]TaskFilter{
		"created_from": {CreatedFrom: at("1969-12-31T23:59:59Z")},
		"created_to":   {CreatedTo: at("9999-12-31T23:59:59-01:00")}, // year 10000 in UTC
		"status":       {Statuses: []store.Status{"failed"}},
		"type":         {Types: []string{strings.Repeat("t", MaxTypeName+1)}},
		"owner":        {Owner: "a\xffb"},
		"q":            {Search: strings.Repeat("x", MaxSearch+1)},
	}
	for field, f := range bad {
		var ferr *FilterError
		if err := f.Validate(); !errors.As(err, &ferr) || ferr.Fields[0].Field != field {
			t.Errorf("%s: %v", field, err)
		}
	}
	if err := (CustomerFilter{City: strings.Repeat("城", MaxFilterText), Level: "diamond", CodePrefix: strings.Repeat("C", MaxCodePrefix)}).Validate(); err != nil {
		t.Errorf("filter at its limits: %v", err)
	}
}
