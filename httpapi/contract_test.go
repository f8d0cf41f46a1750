package httpapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/taskcenter/taskcenter/httpapi/automation"
	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/live"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/internal/contracttest"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/jobs/report"
	"github.com/taskcenter/taskcenter/jobs/webhook"
	"github.com/taskcenter/taskcenter/store/stats"
)

// contract is the served OpenAPI document, loaded once for every test of the package.
var contract = sync.OnceValues(func() (*contracttest.Contract, error) { return contracttest.Load(OpenAPI()) })

func loadContract(t testing.TB) *contracttest.Contract {
	t.Helper()
	c, err := contract()
	if err != nil {
		t.Fatalf("openapi: %v", err)
	}
	return c
}

func TestTheServedDocumentLoads(t *testing.T) {
	t.Parallel()
	loadContract(t)
}

// A download answers the standard library's range and conditional requests, and HEAD, as the
// document says: 206 with Content-Range, 304, headers without a body, and a range outside
// the file as a problem (416 range_not_satisfiable) naming the file's size, like every other
// error. The contract check of newAPI holds each answer to the document.
func TestDownloadsAnswerRangesConditionsAndHeadAsDocumented(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	_, path := e.expiringExport()
	const file = "PK fake xlsx"

	rec := e.call("GET", path, aliceToken, nil, "Range", "bytes=0-1")
	if rec.Code != http.StatusPartialContent || rec.Body.String() != file[:2] || rec.Header().Get("Content-Range") != "bytes 0-1/12" {
		t.Fatalf("a range: %d %q Content-Range %q", rec.Code, rec.Body, rec.Header().Get("Content-Range"))
	}
	rec = e.call("GET", path, aliceToken, nil, "Range", "bytes=100-")
	if p := problemOf(t, rec); rec.Code != http.StatusRequestedRangeNotSatisfiable || p.Code != "range_not_satisfiable" ||
		rec.Header().Get("Content-Range") != "bytes */12" {
		t.Fatalf("a range outside the file: %d %+v Content-Range %q", rec.Code, p, rec.Header().Get("Content-Range"))
	}
	full := e.call("GET", path, aliceToken, nil)
	modified := full.Header().Get("Last-Modified")
	if full.Code != http.StatusOK || modified == "" {
		t.Fatalf("the file: %d Last-Modified %q", full.Code, modified)
	}
	rec = e.call("GET", path, aliceToken, nil, "If-Modified-Since", modified)
	if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Fatalf("unchanged since: %d %q", rec.Code, rec.Body)
	}
	rec = e.call("HEAD", path, aliceToken, nil)
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") != "12" {
		t.Fatalf("HEAD: %d %q Content-Length %q", rec.Code, rec.Body, rec.Header().Get("Content-Length"))
	}
}

// The types' parameter schemas name only what a client sends: the fields a type fills in at
// submit (whose tasks an export or report covers) are not among them, and a submit of a
// report through the generic endpoint validates against the document (checked by newAPI's
// contract) and is accepted.
func TestTypesPublishOnlyTheParametersAClientSends(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	rec := e.call("GET", "/api/v1/types", aliceToken, nil)
	var list struct {
		Items []TypeView `json:"items"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("types: %d %s", rec.Code, rec.Body)
	}
	seen := map[string]bool{}
	for _, ty := range list.Items {
		var schema struct {
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		}
		if err := json.Unmarshal(ty.ParamsSchema, &schema); err != nil {
			t.Fatalf("%s: %v", ty.Name, err)
		}
		if _, ok := schema.Properties["scope"]; ok || slices.Contains(schema.Required, "scope") {
			t.Errorf("%s: params_schema names the server-filled scope: %s", ty.Name, ty.ParamsSchema)
		}
		seen[ty.Name] = true
	}
	if !seen[export.TasksType] || !seen[report.CustomerStatsType] {
		t.Fatalf("types listed: %v", seen)
	}
	rec = e.callJSON("POST", "/api/v1/tasks", aliceToken, map[string]any{"type": report.CustomerStatsType, "params": map[string]any{"days": 7}})
	if rec.Code != http.StatusAccepted {
		t.Fatalf("submit %s: %d %s", report.CustomerStatsType, rec.Code, rec.Body)
	}
}

// The document's schemas and the Go types the handlers encode describe the same fields:
// each field's JSON name is a property, a field always sent is required (and one left out
// when empty is not), a pointer always sent is nullable, and no property lacks a field. So
// the hand-kept schemas cannot drift from the code even where no test's answer shows it.
func TestSchemasMatchTheTypesTheServerEncodes(t *testing.T) {
	t.Parallel()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	item := func(schema, array string) *openapi3.Schema {
		return doc.Components.Schemas[schema].Value.Properties[array].Value.Items.Value
	}
	named := func(name string) *openapi3.Schema { return doc.Components.Schemas[name].Value }
	for _, c := range []struct {
		name   string
		schema *openapi3.Schema
		value  any
	}{
		{"Task", named("Task"), TaskView{}},
		{"TaskDetail", named("TaskDetail"), DetailView{}},
		{"TaskDetail.attempts", item("TaskDetail", "attempts"), AttemptView{}},
		{"TaskDetail.logs", item("TaskDetail", "logs"), LogView{}},
		{"TaskDetail.cancelled_by", named("TaskDetail").Properties["cancelled_by"].Value, ActorView{}},
		{"Progress", named("Progress"), task.Progress{}},
		{"Wait", named("Wait"), task.Wait{}},
		{"Counts", named("Counts"), task.Counts{}},
		{"TaskError", named("TaskError"), task.ErrorView{}},
		{"TaskResult", named("TaskResult"), task.ResultView{}},
		{"TaskLinks", named("TaskLinks"), task.Links{}},
		{"TaskList", named("TaskList"), ListView{}},
		{"SubmitResponse", named("SubmitResponse"), SubmitView{}},
		{"BatchResult.items", item("BatchResult", "items"), BatchItemView{}},
		{"BulkResult", named("BulkResult"), BulkView{}},
		{"BulkResult.results", item("BulkResult", "results"), BulkResult{}},
		{"TypeList.items", item("TypeList", "items"), TypeView{}},
		{"Schedule", named("Schedule"), automation.ScheduleView{}},
		{"Schedule.fires", item("Schedule", "fires"), automation.FireView{}},
		{"Stats.items", item("Stats", "items"), stats.Row{}},
		{"APIToken", named("APIToken"), identity.TokenView{}},
		{"AuditEvent", named("AuditEvent"), identity.AuditView{}},
		{"Webhook", named("Webhook"), automation.WebhookView{}},
		{"Delivery", named("Delivery"), automation.DeliveryView{}},
		{"Delivery.attempts", item("Delivery", "attempts"), automation.DeliveryAttemptView{}},
		{"WebhookEvent", named("WebhookEvent"), webhook.Payload{}},
		{"StreamEvent", named("StreamEvent"), live.StreamView{}},
		{"StreamEvent.event", named("StreamEvent").Properties["event"].Value, live.EventView{}},
		{"Problem", named("Problem"), problem.Problem{}},
		{"Problem.errors", item("Problem", "errors"), problem.FieldError{}},
	} {
		fields := contracttest.JSONFields(reflect.TypeOf(c.value))
		for name, f := range fields {
			prop := c.schema.Properties[name]
			if prop == nil {
				t.Errorf("%s: the server sends %q (%s), which the schema does not name", c.name, name, f.GoName)
				continue
			}
			required := slices.Contains(c.schema.Required, name)
			if required == f.OmitEmpty {
				t.Errorf("%s.%s: required %v, but the field is %s", c.name, name, required,
					map[bool]string{true: "left out when empty", false: "always sent"}[f.OmitEmpty])
			}
			if f.Pointer && !f.OmitEmpty && !prop.Value.Nullable {
				t.Errorf("%s.%s: sent as null when unset, but the schema is not nullable", c.name, name)
			}
		}
		for name := range c.schema.Properties {
			if _, ok := fields[name]; !ok {
				t.Errorf("%s: the schema names %q, which the server never sends", c.name, name)
			}
		}
		if has := c.schema.AdditionalProperties.Has; has == nil || *has {
			t.Errorf("%s: not closed (additionalProperties: false)", c.name)
		}
	}
}
