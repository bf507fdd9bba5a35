package invoker

import (
	"reflect"
	"strings"
)

// Capabilities says which optional Request fields a CLI honours, whether it
// can hold a Session, and how this machine contains its runs. Each backend
// declares the fields once; Invoke and OpenSession refuse a request that
// sets a field its CLI cannot honour with an error that matches
// ErrUnsupported, before anything starts, and everything else (the MCP
// adapter's tool schemas, the conformance suite) reads the same value from
// Invoker.Capabilities.
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
	// Fork: Request.Fork starts a new conversation from a copy of an
	// earlier one.
	Fork bool
	// Deltas: Request.Deltas streams the model's text as it is written.
	Deltas bool
	// Approve: Request.Approve decides the actions the CLI asks
	// permission for.
	Approve bool
	// GoTools: Request.MCPServers may hold servers written in Go
	// (MCPServer.Server), which the run serves to the CLI.
	GoTools bool
	// MCPServers: Request.MCPServers may hold servers of other programs
	// (MCPServer.Command or MCPServer.URL), which the CLI reaches.
	MCPServers bool
	// Sessions: the CLI has a reliable long-lived mode, and OpenSession
	// holds a conversation in one warm process (see Session). It is not a
	// Request field: Supports and Unsupported do not list it.
	Sessions bool

	// Steer: Session.Steer adds a message to a turn in progress.
	Steer bool
	// SwitchModel: TurnRequest.Model changes a session's model between
	// turns.
	SwitchModel bool
	// SwitchPermission: TurnRequest.Permission changes a session's
	// permission level between turns.
	SwitchPermission bool
	// Containment is the level the Invoker's runs get on this machine
	// with its Options: "cgroup", "tracking", "job" or "group" (see the
	// package documentation), or "" when the level Options.Containment
	// forces cannot be had (runs then fail with ErrContainment).
	Containment string
	// ContainmentNote says why runs get less than the best level of
	// their system ("cgroup" on Linux), and how to get it; "" when they
	// get it.
	ContainmentNote string
	// Limits lists the fields of Limits this host can enforce on the
	// Invoker's runs, by their Go names in the order of the struct,
	// separated by spaces: "Memory MemoryHigh Processes CPU" where cgroup
	// v2 controllers are delegated, "Memory Processes CPU" on a hybrid
	// host as root, "" where none can be (strings.Fields splits it; a
	// string keeps Capabilities comparable). A run that asks for another
	// fails with ErrUnsupported before anything starts.
	Limits string
	// LimitsNote says where the limits are held (cgroup v2 or v1
	// controllers), why each of the others cannot be and, once, how to
	// get them, whether the kernel can hold a Budget's memory sum, and how
	// Result.Resources are measured (counted by the kernel, or sampled
	// from /proc).
	LimitsNote string
	// Sandbox is the sandbox this host holds for the Invoker's runs that
	// ask for one (see Sandbox): "filesystem" (Linux with Landlock),
	// "filesystem,network" where Sandbox.Network holds too (Linux, as
	// root or where unprivileged user namespaces are allowed), or ""
	// where there is none.
	Sandbox string
	// SandboxNote says what holds the sandbox (the Landlock ABI, the
	// network namespace), or why there is none, or no network part, and
	// how to get it.
	SandboxNote string
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
	// Every other field of Request means the same for every CLI.
	_, ok := reflect.TypeFor[Request]().FieldByName(field)
	return ok
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

// capability is one optional Request field: its Go name, and whether it is
// supported.
type capability struct {
	name string
	ok   bool
}

// fields lists the optional Request fields in the order of the Request's
// fields. It is the one place that ties a capability to its field; the
// engine finds the field a name stands for by the name.
func (c Capabilities) fields() []capability {
	return []capability{
		{"Model", c.Model},
		{"SessionID", c.Resume},
		{"Fork", c.Fork},
		{"Deltas", c.Deltas},
		{"Images", c.Images},
		{"SystemPrompt", c.SystemPrompt},
		{"OutputSchema", c.OutputSchema},
		{"MaxTurns", c.MaxTurns},
		{"MaxBudgetUSD", c.MaxBudget},
		{"Approve", c.Approve},
		{"MCPServers", c.MCPServers},
	}
}

// String lists what the CLI supports by the names of c's fields, as in
// "Capabilities{Model Resume SystemPrompt Sessions}": every field that is
// true, in the order of the struct. (The containment level, a fact of the
// machine, is in the Containment field.)
func (c Capabilities) String() string {
	var parts []string
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Bool && f.Bool() {
			parts = append(parts, v.Type().Field(i).Name)
		}
	}
	return "Capabilities{" + strings.Join(parts, " ") + "}"
}
