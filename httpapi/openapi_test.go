package httpapi

import (
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
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml does not parse: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	served := map[string]bool{"GET /metrics": true, "GET /monitor/": true} // mounted by cmd
	for _, r := range Routes() {
		served[r] = true
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
