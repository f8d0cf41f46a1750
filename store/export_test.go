package store

import "reflect"

// ColumnLists maps each model's type to the column list its statements name (for the test
// that keeps them in step).
func ColumnLists() map[reflect.Type]string {
	return map[reflect.Type]string{
		reflect.TypeFor[Task](): taskColumns, reflect.TypeFor[Run](): runColumns, reflect.TypeFor[LogEntry](): logColumns,
		reflect.TypeFor[Item](): itemColumns, reflect.TypeFor[CleanupRound](): roundColumns, reflect.TypeFor[Event](): eventColumns,
	}
}
