package httpapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// Every route the server answers must be in the API description, and the description must
// not promise routes that do not exist.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.yaml does not parse: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	served := map[string]bool{"GET /metrics": true, "GET /monitor/": true, // mounted by cmd
		"HEAD /metrics": true, "HEAD /monitor/": true}
	for _, r := range Routes() {
		served[r] = true
		if get, ok := strings.CutPrefix(r, "GET "); ok {
			served["HEAD "+get] = true // a GET pattern serves HEAD too
		}
		method, path, _ := strings.Cut(r, " ")
		ops, ok := doc.Paths[path]
		if !ok {
			t.Errorf("route %s is missing from openapi.yaml", r)
			continue
		}
		if _, ok := ops[strings.ToLower(method)]; !ok {
			t.Errorf("route %s: openapi.yaml has the path but not the method", r)
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			if !served[strings.ToUpper(method)+" "+path] {
				t.Errorf("openapi.yaml documents %s %s, which the server does not serve", strings.ToUpper(method), path)
			}
		}
	}
}

// Every problem code the API writes is listed in openapi.yaml's x-problem-codes, and the
// list names no code the API never writes.
func TestOpenAPIListsEveryProblemCode(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Codes map[string]string `yaml:"x-problem-codes"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	// The argument of each constructor that is the code (when a literal): the API's own, and
	// the file problems of an upload (which answer as problems with their code).
	constructors := map[string]int{"problem.New": 1, "problem.Say": 1, "problem.BadRequest": 0, "problem.Invalid": 0, "decodeProblem": 0,
		"problem":    1, // the importer's own file problems
		"fieldError": 0} // a webhook's refused URL or secret
	used := problemCodes(t, constructors, "*.go", "*/*.go", "../jobs/importer/*.go", "../jobs/webhook/*.go")
	// The spreadsheet readers' codes (internal/sheet/sheettype's Code constants), which an upload's
	// problems answer with.
	maps.Copy(used, codeConstants(t, "../internal/sheet/sheettype/*.go", "Code"))
	// And the import's own refusals of the uploader's choices (FileProblem{Code: …}).
	maps.Copy(used, stringsIn(t, []string{"../jobs/importer/*.go"}, func(n ast.Node) []ast.Expr {
		if kv, ok := n.(*ast.KeyValueExpr); ok {
			if id, ok := kv.Key.(*ast.Ident); ok && id.Name == "Code" {
				return []ast.Expr{kv.Value}
			}
		}
		return nil
	}))
	// A task type's refusal of its parameters at submit answers 422 with its code
	// (jobs.BadInput); the same call in a handler's Run is a task's error code instead, so
	// these codes need not all be listed, but a listed code must be written somewhere.
	written := problemCodes(t, map[string]int{"BadInput": 0}, "../jobs/*.go", "../jobs/*/*.go")
	if len(used) < 20 {
		t.Fatalf("found only %d codes in the source: %v", len(used), used)
	}
	for code := range used {
		if _, ok := doc.Components.Codes[code]; !ok {
			t.Errorf("problem code %q is not in openapi.yaml components.x-problem-codes", code)
		}
	}
	for code := range doc.Components.Codes {
		if !used[code] && !written[code] {
			t.Errorf("openapi.yaml lists problem code %q, which the API never writes", code)
		}
	}
}

// codeConstants lists the string constants of the named type in the non-test Go files
// matching pattern.
func codeConstants(t *testing.T, pattern, typeName string) map[string]bool {
	t.Helper()
	out := stringsIn(t, []string{pattern}, func(n ast.Node) []ast.Expr {
		if spec, ok := n.(*ast.ValueSpec); ok {
			if id, ok := spec.Type.(*ast.Ident); ok && id.Name == typeName {
				return spec.Values
			}
		}
		return nil
	})
	if len(out) == 0 {
		t.Fatalf("no %s constants in %s", typeName, pattern)
	}
	return out
}

// problemCodes lists the string literals passed as the code argument of the constructors in
// the non-test Go files matching the patterns.
func problemCodes(t *testing.T, constructors map[string]int, patterns ...string) map[string]bool {
	t.Helper()
	return stringsIn(t, patterns, func(n ast.Node) []ast.Expr {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return nil
		}
		// A constructor is named as called: bare (BadInput, decodeProblem) or with the package
		// it is called through (problem.New), also matching a bare name (jobs.BadInput).
		var fn, qualified string
		switch f := call.Fun.(type) {
		case *ast.Ident:
			fn = f.Name
		case *ast.SelectorExpr:
			fn = f.Sel.Name
			if x, ok := f.X.(*ast.Ident); ok {
				qualified = x.Name + "." + fn
			}
		}
		i, ok := constructors[qualified]
		if !ok {
			i, ok = constructors[fn]
		}
		if ok && i < len(call.Args) {
			return call.Args[i : i+1]
		}
		return nil
	})
}

// stringsIn collects the string literals that pick returns for the nodes of the non-test Go
// files matching the patterns.
func stringsIn(t *testing.T, patterns []string, pick func(ast.Node) []ast.Expr) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, pattern := range patterns {
		names, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				for _, e := range pick(n) {
					if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						out[v] = true
					}
				}
				return true
			})
		}
	}
	return out
}

// Every authenticated API operation documents the throttle's 429 (too_many_failures): any of
// them answers it to a refused credential past the limit. One with a 429 of its own names the
// code in it.
func TestEveryAuthenticatedOperationDocumentsTheThrottle(t *testing.T) {
	t.Parallel()
	type response struct {
		Ref         string `yaml:"$ref"`
		Description string `yaml:"description"`
	}
	var doc struct {
		Paths      map[string]map[string]any `yaml:"paths"`
		Components struct {
			Responses map[string]response `yaml:"responses"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	type operation struct {
		Security  *[]any              `yaml:"security"`
		Responses map[string]response `yaml:"responses"`
	}
	checked := 0
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			if method == "parameters" || !strings.HasPrefix(path, "/api/") {
				continue
			}
			var op operation
			if b, err := yaml.Marshal(raw); err != nil || yaml.Unmarshal(b, &op) != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			if op.Security != nil {
				continue
			}
			res, ok := op.Responses["429"]
			if name, isRef := strings.CutPrefix(res.Ref, "#/components/responses/"); isRef {
				res = doc.Components.Responses[name]
			}
			if !ok || !strings.Contains(res.Description, "too_many_failures") {
				t.Errorf("%s %s: its 429 (%q) does not name too_many_failures", strings.ToUpper(method), path, res.Description)
			}
			checked++
		}
	}
	if checked < 30 {
		t.Fatalf("checked only %d operations", checked)
	}
}
