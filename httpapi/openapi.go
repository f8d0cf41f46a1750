package httpapi

import (
	"bytes"
	_ "embed"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
)

// openapiSource is the hand-kept part of the contract: every path, its own answers, the
// schemas and the prose. The answers every operation of a kind shares are added by
// assembleOpenAPI, so that no operation can forget one.
//
//go:embed openapi.yaml
var openapiSource []byte

// OpenAPI is the API description served at /openapi.yaml: openapi.yaml with the shared
// answers and the HEAD operations added (assembleOpenAPI). Tests validate every request and
// answer against it, lint it and generate a client from it.
var OpenAPI = sync.OnceValue(func() []byte {
	doc, err := assembleOpenAPI(openapiSource)
	if err != nil {
		panic("httpapi: openapi.yaml: " + err.Error()) // the source is embedded; a test assembles it
	}
	return doc
})

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(OpenAPI()) //nolint:errcheck
}

// sharedAnswer is an answer every operation of a kind gives, added under status unless the
// operation documents that status itself (then its own text must name the shared code too).
type sharedAnswer struct {
	status string
	ref    string // a components/responses entry
	when   func(op operationInfo) bool
}

// operationInfo is what decides which shared answers an operation gives.
type operationInfo struct {
	path          string
	authenticated bool // no `security: []` of its own
	jsonBody      bool // reads an application/json body
	formBody      bool // reads a multipart/form-data body
	idParams      bool // has a path parameter (an object id)
}

func (o operationInfo) api() bool  { return strings.HasPrefix(o.path, "/api/") }
func (o operationInfo) body() bool { return o.jsonBody || o.formBody }

var sharedAnswers = []sharedAnswer{
	{"400", "InvalidID", func(o operationInfo) bool { return o.idParams }},
	{"401", "Unauthorized", func(o operationInfo) bool { return o.authenticated }},
	{"403", "InsufficientScope", func(o operationInfo) bool { return o.authenticated }},
	{"408", "BodyTooSlow", operationInfo.body},
	{"413", "BodyTooLarge", operationInfo.body},
	{"415", "UnsupportedMediaType", operationInfo.body},
	{"429", "Throttled", func(o operationInfo) bool { return o.authenticated && o.api() }},
	{"500", "Internal", operationInfo.api},
	{"503", "Unavailable", operationInfo.api},
}

// assembleOpenAPI adds to the source document what the server does for every operation of a
// kind: the shared answers (sharedAnswers) and a HEAD operation beside every GET (the GET's
// answers without their bodies). It refuses an operation without an operationId.
func assembleOpenAPI(src []byte) ([]byte, error) {
	var doc yaml.MapSlice
	if err := yaml.UnmarshalWithOptions(src, &doc, yaml.UseOrderedMap()); err != nil {
		return nil, err
	}
	paths, ok := lookup(doc, "paths").(yaml.MapSlice)
	if !ok {
		return nil, fmt.Errorf("no paths")
	}
	for i, p := range paths {
		path, _ := p.Key.(string)
		item, _ := p.Value.(yaml.MapSlice)
		pathIDs := hasPathParam(doc, lookup(item, "parameters"))
		var out yaml.MapSlice
		for _, m := range item {
			method, _ := m.Key.(string)
			op, isOp := m.Value.(yaml.MapSlice)
			if !isOp || !isMethod(method) {
				out = append(out, m)
				continue
			}
			id, _ := lookup(op, "operationId").(string)
			if id == "" {
				return nil, fmt.Errorf("%s %s has no operationId", strings.ToUpper(method), path)
			}
			info := operationInfo{path: path, idParams: pathIDs || hasPathParam(doc, lookup(op, "parameters"))}
			_, public := lookup(op, "security").([]any)
			info.authenticated = !public
			if content, ok := lookup(lookup(op, "requestBody"), "content").(yaml.MapSlice); ok {
				info.jsonBody = lookup(content, "application/json") != nil
				info.formBody = lookup(content, "multipart/form-data") != nil
			}
			op = withSharedAnswers(op, info)
			out = append(out, yaml.MapItem{Key: method, Value: op})
			if method == "get" {
				out = append(out, yaml.MapItem{Key: "head", Value: headOf(op, id)})
			}
		}
		paths[i].Value = out
	}
	var buf bytes.Buffer
	buf.WriteString("# The taskcenter REST contract. Served at /openapi.yaml; assembled from httpapi/openapi.yaml\n" +
		"# with the answers every operation of a kind shares and a HEAD beside every GET.\n")
	b, err := yaml.MarshalWithOptions(doc, yaml.UseLiteralStyleIfMultiline(true))
	if err != nil {
		return nil, err
	}
	buf.Write(b)
	return buf.Bytes(), nil
}

func withSharedAnswers(op yaml.MapSlice, info operationInfo) yaml.MapSlice {
	responses, _ := lookup(op, "responses").(yaml.MapSlice)
	for _, a := range sharedAnswers {
		if a.when(info) && lookup(responses, a.status) == nil {
			responses = append(responses, yaml.MapItem{Key: a.status,
				Value: yaml.MapSlice{{Key: "$ref", Value: "#/components/responses/" + a.ref}}})
		}
	}
	return set(op, "responses", responses)
}

// headOf is the HEAD operation of a GET: the same parameters and answers, no bodies.
func headOf(get yaml.MapSlice, id string) yaml.MapSlice {
	var head yaml.MapSlice
	for _, it := range get {
		switch it.Key {
		case "operationId":
			head = append(head, yaml.MapItem{Key: "operationId", Value: id + "Head"})
		case "summary":
			head = append(head, yaml.MapItem{Key: "summary", Value: fmt.Sprintf("The headers of %s (no body)", it.Value)})
		case "description", "requestBody":
		default:
			head = append(head, it)
		}
	}
	return head
}

func isMethod(s string) bool {
	switch s {
	case "get", "put", "post", "delete", "options", "head", "patch", "trace":
		return true
	}
	return false
}

// hasPathParam reports whether a parameters list holds a path parameter, inline or as a
// $ref into components/parameters (resolved in doc).
func hasPathParam(doc yaml.MapSlice, params any) bool {
	list, _ := params.([]any)
	for _, p := range list {
		m, _ := p.(yaml.MapSlice)
		if ref, ok := lookup(m, "$ref").(string); ok {
			name, _ := strings.CutPrefix(ref, "#/components/parameters/")
			m, _ = lookup(lookup(lookup(doc, "components"), "parameters"), name).(yaml.MapSlice)
		}
		if lookup(m, "in") == "path" {
			return true
		}
	}
	return false
}

func lookup(v any, key string) any {
	m, _ := v.(yaml.MapSlice)
	for _, it := range m {
		if it.Key == key {
			return it.Value
		}
	}
	return nil
}

func set(m yaml.MapSlice, key string, v any) yaml.MapSlice {
	for i, it := range m {
		if it.Key == key {
			m[i].Value = v
			return m
		}
	}
	return append(m, yaml.MapItem{Key: key, Value: v})
}
