package contracttest

import (
	"maps"
	"reflect"
	"strings"
)

// Field is how encoding/json writes one field of a struct.
type Field struct {
	GoName    string
	OmitEmpty bool // left out when empty
	Pointer   bool // a pointer: null when unset (unless OmitEmpty)
}

// JSONFields lists, by JSON name, the fields encoding/json reads and writes for a struct
// type, embedded structs inlined: what a schema of the type must name.
func JSONFields(typ reflect.Type) map[string]Field {
	out := map[string]Field{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && tag == "" {
			maps.Copy(out, JSONFields(f.Type))
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = Field{GoName: f.Name, OmitEmpty: strings.Contains(opts, "omitempty"), Pointer: f.Type.Kind() == reflect.Pointer}
	}
	return out
}
