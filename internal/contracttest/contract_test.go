package contracttest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const doc = `
openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /api/v1/things/{id}:
    parameters:
      - {name: id, in: path, required: true, schema: {type: string, maxLength: 8}}
    get:
      operationId: getThing
      responses:
        "200":
          description: the thing
          content:
            application/json:
              schema:
                type: object
                additionalProperties: false
                required: [id, size]
                properties:
                  id: {type: string}
                  size: {type: integer}
        "404":
          description: none
          content:
            application/problem+json:
              schema: {type: object}
  /api/v1/things/{id}/events:
    parameters:
      - {name: id, in: path, required: true, schema: {type: string}}
    get:
      operationId: streamThing
      responses:
        "200":
          description: events
          content:
            text/event-stream:
              schema: {type: string}
              x-event-data: {$ref: "#/components/schemas/Event"}
components:
  schemas:
    Event:
      type: object
      additionalProperties: false
      required: [id]
      properties:
        id: {type: string}
  x-problem-codes:
    thing_not_found: 404, no such thing
`

// The checker refuses each way an answer can contradict the document, and passes one that
// does not.
func TestEachContradictionIsCaught(t *testing.T) {
	t.Parallel()
	c, err := Load([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	c.recordDir = "" // this document's bodies are not the API's
	json := http.Header{"Content-Type": {"application/json"}}
	problem := http.Header{"Content-Type": {"application/problem+json"}}
	stream := http.Header{"Content-Type": {"text/event-stream"}}
	cases := []struct {
		name, target string
		status       int
		header       http.Header
		body         string
		want         string // "" : no contradiction
	}{
		{"as documented", "/api/v1/things/a", 200, json, `{"id":"a","size":1}`, ""},
		{"a documented problem", "/api/v1/things/a", 404, problem,
			`{"type":"/openapi.yaml#/components/x-problem-codes/thing_not_found","code":"thing_not_found","status":404}`, ""},
		{"a field the document does not name", "/api/v1/things/a", 200, json, `{"id":"a","size":1,"colour":"red"}`, "colour"},
		{"a required field missing", "/api/v1/things/a", 200, json, `{"id":"a"}`, "size"},
		{"a field of the wrong type", "/api/v1/things/a", 200, json, `{"id":"a","size":"big"}`, "size"},
		{"an undocumented status", "/api/v1/things/a", 409, problem, `{}`, "status 409 is not documented"},
		{"an undocumented media type", "/api/v1/things/a", 200, http.Header{"Content-Type": {"text/plain"}}, `hello`, "text/plain"},
		{"an empty body where one is documented", "/api/v1/things/a", 200, json, ``, "empty body"},
		{"a problem code not listed", "/api/v1/things/a", 404, problem,
			`{"type":"/openapi.yaml#/components/x-problem-codes/gone","code":"gone","status":404}`, `"gone" is not in x-problem-codes`},
		{"a problem type that resolves nowhere", "/api/v1/things/a", 404, problem,
			`{"type":"about:blank","code":"thing_not_found","status":404}`, "problem type"},
		{"a request the document refuses, accepted", "/api/v1/things/much-too-long", 200, json, `{"id":"a","size":1}`, "accepted (200)"},
		{"an undocumented operation answered", "/api/v1/nothing", 200, json, `{}`, "not in the document"},
		{"an undocumented operation refused as a problem", "/api/v1/nothing", 404, problem,
			`{"type":"/openapi.yaml#/components/x-problem-codes/thing_not_found","code":"thing_not_found","status":404}`, ""},
		{"events as documented", "/api/v1/things/a/events", 200, stream, "retry: 3000\n\nid: 1\nevent: status\ndata: {\"id\":\"a\"}\n\n: keep-alive\n\n", ""},
		{"an event whose data the document does not describe", "/api/v1/things/a/events", 200, stream,
			"id: 1\ndata: {\"id\":\"a\"}\n\nid: 2\ndata: {\"id\":\"a\",\"extra\":1}\n\n", "event 2"},
		{"outside the API", "/login", 200, http.Header{"Content-Type": {"text/html"}}, `<html>`, ""},
	}
	for _, tc := range cases {
		req := httptest.NewRequest("GET", "http://x"+tc.target, nil)
		err := c.Check(Exchange{Request: req, RequestBody: []byte{}, Status: tc.status, Header: tc.header, Body: []byte(tc.body)})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s: not caught", tc.name)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: %v, want it to name %q", tc.name, err, tc.want)
		}
	}
}
