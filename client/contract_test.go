package client_test

import (
	"reflect"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/taskcenter/taskcenter/client"
	"github.com/taskcenter/taskcenter/httpapi"
	"github.com/taskcenter/taskcenter/internal/contracttest"
)

// The client's types name exactly the fields the API's OpenAPI document gives each answer:
// a field the document does not have would never be filled, and a property the client lacks
// is one its users cannot see. (The end-to-end tests drive the client through a transport
// that validates every exchange against the same document.)
func TestTypesNameWhatTheDocumentDescribes(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	schema := func(name string) *openapi3.Schema { return doc.Components.Schemas[name].Value }
	items := func(s *openapi3.Schema, array string) *openapi3.Schema { return s.Properties[array].Value.Items.Value }
	for _, c := range []struct {
		name   string
		schema *openapi3.Schema
		value  any
	}{
		{"TaskDetail", schema("TaskDetail"), client.Task{}},
		{"TaskDetail.attempts", items(schema("TaskDetail"), "attempts"), client.Attempt{}},
		{"TaskDetail.logs", items(schema("TaskDetail"), "logs"), client.LogLine{}},
		{"TaskDetail.cancelled_by", schema("TaskDetail").Properties["cancelled_by"].Value, client.CancelledBy{}},
		{"TaskDetail.rejected_breakdown", items(schema("TaskDetail"), "rejected_breakdown"), client.FieldCount{}},
		{"TaskDetail.rejected_breakdown.reasons", items(items(schema("TaskDetail"), "rejected_breakdown"), "reasons"), client.ReasonCount{}},
		{"LogPage", schema("LogPage"), client.LogPage{}},
		{"LogPage.items", items(schema("LogPage"), "items"), client.LogLine{}},
		{"SubmitResponse", schema("SubmitResponse"), client.Submitted{}},
		{"TaskList", schema("TaskList"), client.Page{}},
		{"BulkResult.results", items(schema("BulkResult"), "results"), client.BulkResult{}},
		{"Webhook", schema("Webhook"), client.Webhook{}},
		{"Delivery", schema("Delivery"), client.Delivery{}},
		{"Delivery.attempts", items(schema("Delivery"), "attempts"), client.DeliveryAttempt{}},
		{"WebhookEvent", schema("WebhookEvent"), client.WebhookEvent{}},
		{"Problem", schema("Problem"), client.Problem{}},
		{"Problem.errors", items(schema("Problem"), "errors"), client.FieldError{}},
	} {
		fields := contracttest.JSONFields(reflect.TypeOf(c.value))
		for name := range fields {
			if c.schema.Properties[name] == nil {
				t.Errorf("%s: the client reads %q, which the document does not describe", c.name, name)
			}
		}
		for name := range c.schema.Properties {
			if _, ok := fields[name]; !ok {
				t.Errorf("%s: the document describes %q, which the client does not read", c.name, name)
			}
		}
	}
}
