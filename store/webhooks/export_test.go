package webhooks

import "reflect"

// ColumnLists maps each model's type to the column list its statements name (for the test
// that keeps them in step).
func ColumnLists() map[reflect.Type]string {
	return map[reflect.Type]string{
		reflect.TypeFor[Subscription](): subscriptionColumns, reflect.TypeFor[Delivery](): deliveryColumns,
		reflect.TypeFor[DeliveryAttempt](): attemptColumns,
	}
}
