package httpapi

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the API description served at /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(OpenAPI) //nolint:errcheck
}
