// Package contracttest holds the API's tests to its OpenAPI document: every request a test
// sends and every answer it receives pass through a Contract, which fails the test when the
// answer's status, content type, headers or body are not what the document says, and when
// the server accepts a request the document refuses. With TASKCENTER_CONTRACT_RECORD set to
// a directory, the JSON bodies seen are written there, for a generated client to be
// compiled against (scripts/contract.sh).
package contracttest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// RecordEnv names the directory recorded bodies go to (unset: nothing is recorded).
const RecordEnv = "TASKCENTER_CONTRACT_RECORD"

// recordCap bounds the bodies recorded per operation and status in one test process.
const recordCap = 40

// Contract is a loaded OpenAPI document to check exchanges against. Safe for concurrent use.
type Contract struct {
	doc    *openapi3.T
	router routers.Router
	codes  map[string]bool // x-problem-codes

	recordDir string // RecordEnv at Load; "" records nothing
	mu        sync.Mutex
	recorded  map[string]int
}

var registerDecoders sync.Once

// Load reads an OpenAPI document (YAML or JSON) and validates it.
func Load(src []byte) (*Contract, error) {
	registerDecoders.Do(func() {
		for _, ct := range []string{"text/event-stream", "text/html",
			"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"} {
			openapi3filter.RegisterBodyDecoder(ct, openapi3filter.FileBodyDecoder)
		}
	})
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(src)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	// Route on paths alone: tests reach the server on whatever address it listens.
	doc.Servers = openapi3.Servers{{URL: "/"}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	c := &Contract{doc: doc, router: router, codes: map[string]bool{}, recorded: map[string]int{}, recordDir: os.Getenv(RecordEnv)}
	if comps, ok := doc.Components.Extensions["x-problem-codes"].(map[string]any); ok {
		for code := range comps {
			c.codes[code] = true
		}
	}
	return c, nil
}

// Exchange is one request and its answer as a client saw them.
type Exchange struct {
	Request     *http.Request
	RequestBody []byte // nil when the body could not be kept (a stream): it is not checked
	Status      int
	Header      http.Header
	Body        []byte
}

// Check returns what in the exchange contradicts the document (nil: nothing).
func (c *Contract) Check(ex Exchange) error {
	req := ex.Request
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		if !strings.HasPrefix(req.URL.Path, "/api/") {
			return nil // the web app and the mounts are not part of the REST contract
		}
		// Not a documented operation: the answer must be the documented refusal.
		if ex.Status != http.StatusNotFound && ex.Status != http.StatusMethodNotAllowed && ex.Status != http.StatusBadRequest {
			return fmt.Errorf("%s %s is not in the document (%v), yet answered %d", req.Method, req.URL.Path, err, ex.Status)
		}
		return c.checkProblem(ex)
	}
	var errs []error
	if ex.Status >= 200 && ex.Status < 400 {
		if err := c.checkRequest(ex, route, params); err != nil {
			errs = append(errs, fmt.Errorf("the server accepted (%d) a request the document refuses: %w", ex.Status, err))
		}
	}
	errs = append(errs, c.checkResponse(ex, route, params))
	if strings.HasPrefix(mediaType(ex.Header), "application/problem+json") {
		errs = append(errs, c.checkProblem(ex))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s %s → %d: %w", req.Method, req.URL.RequestURI(), ex.Status, err)
	}
	c.record(ex, route)
	return nil
}

// recordEvents writes the data of each event of a stream, typed by the schema x-event-data
// names.
func (c *Contract) recordEvents(ex Exchange, route *routers.Route) {
	res := route.Operation.Responses.Status(ex.Status)
	if res == nil || res.Value == nil || res.Value.Content.Get("text/event-stream") == nil {
		return
	}
	name := eventSchema(res.Value)
	if name == "" {
		return
	}
	for _, data := range eventData(ex.Body) {
		c.write("schema "+name, map[string]any{"schema": name, "body": json.RawMessage(data)})
	}
}

func (c *Contract) checkRequest(ex Exchange, route *routers.Route, params map[string]string) error {
	req := ex.Request.Clone(context.Background())
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	if ex.RequestBody == nil {
		opts.ExcludeRequestBody = true
		req.Body = http.NoBody
	} else {
		req.Body = io.NopCloser(bytes.NewReader(ex.RequestBody))
	}
	return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route, Options: opts})
}

func (c *Contract) checkResponse(ex Exchange, route *routers.Route, params map[string]string) error {
	op := route.Operation
	ref := op.Responses.Status(ex.Status)
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("status %d is not documented for %s %s", ex.Status, route.Method, route.Path)
	}
	if ex.Request.Method == http.MethodHead || ex.Status == http.StatusNotModified {
		return nil // no body; kin-openapi checks nothing more of them either
	}
	if len(ex.Body) > 0 && len(ref.Value.Content) == 0 {
		return fmt.Errorf("a %s body, but the document's %d answer has none", mediaType(ex.Header), ex.Status)
	}
	in := &openapi3filter.RequestValidationInput{Request: ex.Request, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: ex.Status, Header: ex.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	out.SetBodyBytes(ex.Body)
	if len(ex.Body) == 0 {
		if len(ref.Value.Content) > 0 && ex.Status != http.StatusPartialContent && route.Method != http.MethodHead {
			return fmt.Errorf("an empty body, but the document's %d answer has one", ex.Status)
		}
		return nil
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return err
	}
	return c.checkEvents(ex, ref.Value)
}

// checkEvents checks the data of each event of an event stream against the schema its media
// type names in x-event-data.
func (c *Contract) checkEvents(ex Exchange, res *openapi3.Response) error {
	if mediaType(ex.Header) != "text/event-stream" {
		return nil
	}
	name := eventSchema(res)
	if name == "" {
		return nil
	}
	ref := c.doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("x-event-data names %q, which is not a schema", name)
	}
	var errs []error
	for i, data := range eventData(ex.Body) {
		var v any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			errs = append(errs, fmt.Errorf("event %d: data is not JSON: %w", i+1, err))
			continue
		}
		if err := ref.Value.VisitJSON(v, openapi3.VisitAsResponse(), openapi3.MultiErrors()); err != nil {
			errs = append(errs, fmt.Errorf("event %d: data does not match %s: %w", i+1, name, err))
		}
	}
	return errors.Join(errs...)
}

// eventSchema is the component schema an event stream's x-event-data refers to
// ({$ref: "#/components/schemas/Name"}), "" when none.
func eventSchema(res *openapi3.Response) string {
	mt := res.Content.Get("text/event-stream")
	if mt == nil {
		return ""
	}
	ext, _ := mt.Extensions["x-event-data"].(map[string]any)
	ref, _ := ext["$ref"].(string)
	name, _ := strings.CutPrefix(ref, "#/components/schemas/")
	return name
}

// eventData is the data of each event of a text/event-stream body that has some (its data
// lines joined by newlines, as an EventSource delivers it).
func eventData(body []byte) []string {
	var out []string
	for _, block := range strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n\n") {
		var data []string
		for _, line := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(v, " "))
			}
		}
		if len(data) > 0 {
			out = append(out, strings.Join(data, "\n"))
		}
	}
	return out
}

// checkProblem checks what the document says of every problem in prose: its code is listed
// and its type resolves to that code's description.
func (c *Contract) checkProblem(ex Exchange) error {
	if mt := mediaType(ex.Header); mt != "application/problem+json" {
		return fmt.Errorf("a %d answer as %q, not application/problem+json", ex.Status, mt)
	}
	var p struct {
		Type   string `json:"type"`
		Code   string `json:"code"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(ex.Body, &p); err != nil {
		return fmt.Errorf("problem body: %w", err)
	}
	var errs []error
	if !c.codes[p.Code] {
		errs = append(errs, fmt.Errorf("problem code %q is not in x-problem-codes", p.Code))
	}
	if want := "/openapi.yaml#/components/x-problem-codes/" + p.Code; p.Type != want {
		errs = append(errs, fmt.Errorf("problem type %q, want %q", p.Type, want))
	}
	if p.Status != ex.Status {
		errs = append(errs, fmt.Errorf("problem status %d in a %d answer", p.Status, ex.Status))
	}
	return errors.Join(errs...)
}

// record writes a JSON body to the record directory, named by its content, with what a
// generated client needs to type it: the path template, method, status and media type.
func (c *Contract) record(ex Exchange, route *routers.Route) {
	mt := mediaType(ex.Header)
	if c.recordDir == "" || len(ex.Body) == 0 || ex.Request.Method == http.MethodHead {
		return
	}
	if mt == "text/event-stream" {
		c.recordEvents(ex, route)
		return
	}
	if !strings.HasSuffix(mt, "json") {
		return
	}
	c.write(fmt.Sprintf("%s %s %d", route.Method, route.Path, ex.Status), map[string]any{"method": strings.ToLower(route.Method),
		"path": route.Path, "status": ex.Status, "content_type": mt, "body": json.RawMessage(ex.Body)})
}

// write stores one record under key's cap.
func (c *Contract) write(key string, record map[string]any) {
	c.mu.Lock()
	full := c.recorded[key] >= recordCap
	c.recorded[key]++
	c.mu.Unlock()
	if full {
		return
	}
	rec, err := json.Marshal(record)
	if err != nil {
		return // not JSON after all: the response check has said so
	}
	sum := sha256.Sum256(rec)
	_ = os.MkdirAll(c.recordDir, 0o755)
	_ = os.WriteFile(filepath.Join(c.recordDir, hex.EncodeToString(sum[:12])+".json"), rec, 0o644)
}

func mediaType(h http.Header) string {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return h.Get("Content-Type")
	}
	return mt
}

// reporter is where a failed check goes: t.Errorf while the test runs, nowhere after it.
type reporter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func newReporter(t testing.TB) *reporter {
	r := &reporter{t: t}
	t.Cleanup(func() { r.mu.Lock(); r.done = true; r.mu.Unlock() })
	return r
}

func (r *reporter) report(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		r.t.Errorf("contract: %v", err)
	}
}

// checkHead checks an exchange whose body was not kept: its status and media type.
func (c *Contract) checkHead(ex Exchange) error {
	req := ex.Request
	route, _, err := c.router.FindRoute(req)
	if err != nil {
		if !strings.HasPrefix(req.URL.Path, "/api/") {
			return nil
		}
		return fmt.Errorf("%s %s is not in the document (%v), yet answered %d", req.Method, req.URL.Path, err, ex.Status)
	}
	ref := route.Operation.Responses.Status(ex.Status)
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("%s %s → %d: status not documented for %s %s", req.Method, req.URL.RequestURI(), ex.Status, route.Method, route.Path)
	}
	if mt := mediaType(ex.Header); mt != "" && len(ref.Value.Content) > 0 && ref.Value.Content.Get(mt) == nil {
		return fmt.Errorf("%s %s → %d: media type %q not documented", req.Method, req.URL.RequestURI(), ex.Status, mt)
	}
	return nil
}
