package invoker

// Capabilities says which optional Request fields a CLI honours. Each
// backend declares its Capabilities once; the engine refuses a Request that
// sets a field its CLI cannot honour with an error that matches
// ErrUnsupported, before anything starts, and everything else (the MCP
// adapter's tool schemas, the conformance suite) reads the same value.
//
// Prompt, Workdir, Permission, Env and OnEvent mean the same for every CLI
// and are always supported. ExtraArgs is passed through unchecked.
type Capabilities struct {
	// Model: Request.Model selects the model.
	Model bool
	// Resume: Request.SessionID resumes an earlier session.
	Resume bool
	// Images: Request.Images attaches image files.
	Images bool
	// SystemPrompt: Request.SystemPrompt adds to the CLI's system prompt.
	SystemPrompt bool
	// OutputSchema: Request.OutputSchema constrains the final answer to a
	// JSON Schema.
	OutputSchema bool
	// MaxTurns: Request.MaxTurns bounds the number of agentic turns.
	MaxTurns bool
	// MaxBudget: Request.MaxBudgetUSD bounds what the turn may spend.
	MaxBudget bool
	// Sessions: the CLI has a reliable long-lived mode, and OpenSession
	// holds a conversation in one warm process (see Session). It is not a
	// Request field: Supports and Unsupported do not list it.
	Sessions bool
}

// A CapabilityReporter is an Invoker that says what it supports. Every
// Invoker returned by this module's backends is one; see CapabilitiesOf.
type CapabilityReporter interface {
	Invoker
	// Capabilities returns what the Invoker's CLI supports. It is the same
	// on every call.
	Capabilities() Capabilities
}

// CapabilitiesOf returns what inv supports. ok is false when inv does not
// report its capabilities (it is not a CapabilityReporter, for example a
// wrapper that embeds only the Invoker interface); the zero Capabilities is
// then returned, and the caller should treat every optional field as
// possibly unsupported, to be refused by Invoke with ErrUnsupported.
func CapabilitiesOf(inv Invoker) (c Capabilities, ok bool) {
	if r, ok := inv.(CapabilityReporter); ok {
		return r.Capabilities(), true
	}
	return Capabilities{}, false
}

// Supports reports whether the Request field named field (its Go name, as
// in "SystemPrompt" or "Images") can be set. Fields every CLI honours
// report true; an unknown name reports false.
func (c Capabilities) Supports(field string) bool {
	for _, f := range c.fields() {
		if f.name == field {
			return f.ok
		}
	}
	switch field {
	case "Prompt", "Workdir", "Permission", "Env", "ExtraArgs", "OnEvent":
		return true
	}
	return false
}

// Unsupported returns the Go names of the optional Request fields c does
// not support, in the order of the Request's fields, in a new slice.
func (c Capabilities) Unsupported() []string {
	var out []string
	for _, f := range c.fields() {
		if !f.ok {
			out = append(out, f.name)
		}
	}
	return out
}

// capability is one optional Request field: its Go name, whether it is
// supported, and whether a Request sets it.
type capability struct {
	name string
	ok   bool
	set  func(*Request) bool
}

// fields lists the optional Request fields in the order of the Request's
// fields. It is the one place that ties a capability to its field.
func (c Capabilities) fields() []capability {
	return []capability{
		{"Model", c.Model, func(r *Request) bool { return r.Model != "" }},
		{"SessionID", c.Resume, func(r *Request) bool { return r.SessionID != "" }},
		{"Images", c.Images, func(r *Request) bool { return len(r.Images) > 0 }},
		{"SystemPrompt", c.SystemPrompt, func(r *Request) bool { return r.SystemPrompt != "" }},
		{"OutputSchema", c.OutputSchema, func(r *Request) bool { return len(r.OutputSchema) > 0 }},
		{"MaxTurns", c.MaxTurns, func(r *Request) bool { return r.MaxTurns != 0 }},
		{"MaxBudgetUSD", c.MaxBudget, func(r *Request) bool { return r.MaxBudgetUSD != 0 }},
	}
}

// A Hinter is a Backend that explains, for a Request field its CLI does
// not support, what to do instead. The engine adds the hint to the
// ErrUnsupported error it returns.
type Hinter interface {
	// UnsupportedHint returns the advice for field (a Request field's Go
	// name), or "" for none.
	UnsupportedHint(field string) string
}

// checkCapabilities refuses a Request that sets a field the backend does
// not support, naming the field and, where the backend gives one, what to
// do instead.
func checkCapabilities(b Backend, req *Request) error {
	for _, f := range b.Capabilities().fields() {
		if f.ok || !f.set(req) {
			continue
		}
		hint := ""
		if h, ok := b.(Hinter); ok {
			hint = h.UnsupportedHint(f.name)
		}
		return &unsupportedError{field: f.name, hint: hint}
	}
	return nil
}

// String lists the supported optional fields by their Request field
// names, as in "Capabilities{Model SessionID SystemPrompt}".
func (c Capabilities) String() string {
	s := "Capabilities{"
	sep := ""
	for _, f := range c.fields() {
		if f.ok {
			s += sep + f.name
			sep = " "
		}
	}
	return s + "}"
}
