package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/invopop/jsonschema"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
)

// A task type is one file plus one registration line (README "Adding a task type"): the file
// declares a Type — its name, queue, parameters, title, default priority and policy, who may
// submit it, and its handler — and cmd/taskcenter registers it. The REST API, the runtime,
// the schedules and the configuration all read the registry; none of them holds per-type code.

// Type declares a task type.
type Type struct {
	// Name is the task type, e.g. "export:customers".
	Name string
	// Description says in a sentence what the type does (shown by GET /api/v1/types).
	Description string
	// Queue is the queue the type runs on unless the config says otherwise.
	Queue string
	// NewParams returns a new, empty parameters value: a pointer to a struct decoded strictly
	// from the submit's JSON (unknown fields refused). Its JSON Schema is served to clients.
	NewParams func() Params
	// Title is a text/template over the parameters naming a task of this type in lists, e.g.
	// "Customers of {{.Filter.City}}", the same in every language. Empty: the type's name.
	// Parameters that implement Titled name their task in the catalogue's words instead.
	Title string
	// Priority is the default priority, 1 (first) to 9 (last). Default 5.
	Priority int
	// Policy holds the retry and timeout defaults; the config overrides them per field.
	Policy Policy
	// AdminOnly types may be submitted by admins only.
	AdminOnly bool
	// Handler does the work. It may be nil on processes that only submit.
	Handler Handler
	// Submittable: whether POST /api/v1/tasks accepts the type. Types with their own submit
	// (an import's upload) set it false.
	Submittable bool
	// SubmitVia names the own endpoint of a type that is not Submittable ("POST
	// /api/v1/imports"), as GET /api/v1/types shows it.
	SubmitVia string
	// Disabled types are off unless the config enables them (types.<name>.disabled: false).
	Disabled bool

	title  *template.Template
	schema json.RawMessage
}

// Policy is a type's retry and timeout defaults.
type Policy struct {
	MaxRetry   int           // default 3
	RetryBase  time.Duration // default 30s
	Timeout    time.Duration // no heartbeat this long → TIMEOUT; default 30m
	MaxRuntime time.Duration // default 6h
	StallAfter time.Duration // default 10m
}

// Params is a type's parameters.
type Params interface {
	// Prepare checks the parameters for who submits them and fills in what the server
	// decides (a scope, say). It returns a *BadInputError naming the field at fault.
	Prepare(who Who) error
}

// Titled is implemented by the parameters of a type that names its tasks with a catalogue
// message (internal/msg): the title then reads in each reader's language. The message's
// English is the title stored as text.
type Titled interface {
	TitleMessage() msg.Message
}

// Title is what a task is called: Text is stored as its title (in English: what the list's
// search matches, what webhooks and old readers show) and Message, when the product made the
// title, says it in each reader's language. A submitter's own title has no Message.
type Title struct {
	Text    string
	Message *msg.Message
}

// NewTitle is the title m says: its English as lists show it (task.TitleText), with m itself
// unless m is plain text, which is the same in every language.
func NewTitle(m msg.Message) Title {
	t := Title{Text: task.TitleText(m.English())}
	if m.Code != msg.CodePlain {
		t.Message = &m
	}
	return t
}

// Who submits a task.
type Who struct {
	User  string
	Admin bool
}

// Registry holds the task types a process knows.
type Registry struct {
	mu    sync.RWMutex
	types map[string]*Type
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{types: map[string]*Type{}} }

// Register adds a type. A duplicate name, a missing queue or parameters, or a title that is
// not a template panics: they are wiring mistakes, caught at start.
func (r *Registry) Register(t Type) {
	if t.Name == "" || t.Queue == "" || t.NewParams == nil {
		panic("jobs: a type needs a name, a queue and its parameters: " + t.Name)
	}
	if t.Priority == 0 {
		t.Priority = PriorityDefault
	}
	if t.Title == "" {
		t.Title = t.Name
	}
	tmpl, err := template.New(t.Name).Option("missingkey=zero").Parse(t.Title)
	if err != nil {
		panic(fmt.Sprintf("jobs: type %s: title template: %v", t.Name, err))
	}
	t.title = tmpl
	reflector := jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true}
	schema, err := json.Marshal(reflector.Reflect(t.NewParams()))
	if err != nil {
		panic(fmt.Sprintf("jobs: type %s: params schema: %v", t.Name, err))
	}
	t.schema = schema
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.types[t.Name]; dup {
		panic("jobs: type registered twice: " + t.Name)
	}
	r.types[t.Name] = &t
}

// Lookup returns a registered type.
func (r *Registry) Lookup(name string) (*Type, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.types[name]
	return t, ok
}

// All returns every registered type, sorted by name.
func (r *Registry) All() []*Type {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Type, 0, len(r.types))
	for _, t := range r.types {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *Type) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Schema is the JSON Schema of the type's parameters.
func (t *Type) Schema() json.RawMessage { return t.schema }

// MaySubmit reports whether who may submit the type.
func (t *Type) MaySubmit(who Who) bool { return !t.AdminOnly || who.Admin }

// ErrForbiddenType is returned when the caller may not submit a type.
var ErrForbiddenType = errors.New("only an admin may submit this task type")

// Decode reads raw parameters strictly into the type's parameters, prepares them for who, and
// returns them re-encoded (what the task row stores) with the task's title.
func (t *Type) Decode(raw json.RawMessage, who Who) (json.RawMessage, Title, error) {
	if !t.MaySubmit(who) {
		return nil, Title{}, ErrForbiddenType
	}
	p := t.NewParams()
	if len(bytes.TrimSpace(raw)) > 0 && string(bytes.TrimSpace(raw)) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(p); err != nil {
			return nil, Title{}, BadInput("bad_params", "params are not valid for %s: %v", t.Name, err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return nil, Title{}, BadInput("bad_params", "params for %s must be one JSON object", t.Name)
		}
	}
	if err := p.Prepare(who); err != nil {
		return nil, Title{}, err
	}
	out, err := json.Marshal(p)
	if err != nil {
		return nil, Title{}, fmt.Errorf("encode params of %s: %w", t.Name, err)
	}
	return out, t.TitleOf(p), nil
}

// TitleOfStored is the type's title for parameters a task or a schedule already stored
// (Decode's output, read back as written): a schedule's runs are titled as a submit of the
// same parameters is. The type's name when they no longer decode.
func (t *Type) TitleOfStored(raw json.RawMessage) Title {
	p := t.NewParams()
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, p); err != nil {
			return Title{Text: t.Name}
		}
	}
	return t.TitleOf(p)
}

// TitleOf is the type's title for decoded parameters: their TitleMessage when they are
// Titled, else the Title template's text (the type's name if it fails or says nothing).
func (t *Type) TitleOf(p any) Title {
	if titled, ok := p.(Titled); ok {
		return NewTitle(titled.TitleMessage())
	}
	var b strings.Builder
	if err := t.title.Execute(&b, p); err != nil {
		return Title{Text: t.Name}
	}
	return Title{Text: cmpString(task.TitleText(b.String()), t.Name)}
}

func cmpString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
