package mcpadapter

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/clinvoke/clinvoke/invoker"
)

// Input is the argument of a single-run tool (named after the invoker). Its
// JSON schema is written out in full by Register: struct tags alone cannot
// express the permission enum, the defaults or the per-CLI fields.
//
// In a task of a parallel call, Workdir, Permission, Model and SystemPrompt
// default to the call's values.
type Input struct {
	// Prompt is the task; it must not be blank.
	Prompt string `json:"prompt"`
	// Workdir is the agent's working directory: absolute, existing, and
	// under one of Options.Roots when roots are set.
	Workdir string `json:"workdir"`
	// Permission is "read-only", "workspace-write" or "unlimited", at most
	// Options.MaxPermission; empty means Options.DefaultPermission.
	Permission string `json:"permission,omitempty"`
	// Model overrides the CLI's default model.
	Model string `json:"model,omitempty"`
	// SessionID resumes an earlier session: it must be the session id of
	// an earlier result, which is a UUID. Anything else, such as the
	// "latest", index, name or search term the CLIs' resume flags also
	// take, is refused before anything starts: on a shared server it could
	// resume another client's session.
	SessionID string `json:"session_id,omitempty"`
	// Fork, with SessionID, starts a new conversation from a copy of that
	// session's history and leaves the session as it was (Codex, Claude
	// Code); the result's session id is the new conversation's.
	Fork bool `json:"fork,omitempty"`
	// SystemPrompt adds instructions to the agent's system prompt (Codex,
	// Claude Code; the gemini tools do not offer it).
	SystemPrompt string `json:"system_prompt,omitempty"`
	// Images are image files to attach (Codex), absolute or relative to
	// Workdir, under the roots like Workdir.
	Images []string `json:"images,omitempty"`
	// OutputSchema is a JSON Schema (an object) the final answer must
	// satisfy; the answer is returned as Output.Structured (Codex, Claude
	// Code).
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// MaxTurns bounds the agent's turns, at most Options.MaxTurns (Claude
	// Code).
	MaxTurns int `json:"max_turns,omitempty"`
	// MaxBudgetUSD bounds what the run may spend, in US dollars, at most
	// Options.MaxBudgetUSD (Claude Code).
	MaxBudgetUSD float64 `json:"max_budget_usd,omitempty"`
}

// Output is the structured content of a single-run tool's result, for
// success and failure alike.
type Output struct {
	// Status is "completed", "failed", "cancelled" or "refused" (nothing
	// was started).
	Status Status `json:"status" jsonschema:"completed, failed, cancelled, or refused (nothing was started)"`
	// Text is the agent's final answer, or the partial text gathered
	// before a failure or cancellation.
	Text string `json:"text" jsonschema:"the agent's final answer, or the partial text of a failed or cancelled run"`
	// SessionID resumes the conversation when passed back as session_id;
	// empty if the CLI reported none.
	SessionID string `json:"session_id" jsonschema:"pass it back as session_id to continue this conversation; empty if the CLI reported none"`
	// ExitCode is the CLI's exit status; -1 if it was killed by a signal or
	// never started.
	ExitCode int `json:"exit_code" jsonschema:"the CLI's exit status; -1 if it was killed by a signal or never started"`
	// DurationMS is the run's wall time in milliseconds.
	DurationMS int64 `json:"duration_ms" jsonschema:"wall time in milliseconds"`
	// Usage holds the token counts the CLI reported.
	Usage invoker.Usage `json:"usage" jsonschema:"token counts reported by the CLI"`
	// Error says what went wrong, for any status but "completed".
	Error string `json:"error,omitempty" jsonschema:"what went wrong, for any status but completed"`
	// Resume says how to continue the session after a failure.
	Resume string `json:"resume,omitempty" jsonschema:"how to continue the session after a failure"`
	// Structured is the final answer as JSON when the call gave an
	// output_schema and the answer satisfies it (invoker.Result.Structured);
	// absent otherwise. It holds a json.RawMessage.
	Structured any `json:"structured_output,omitempty" jsonschema:"the answer as JSON, when output_schema was given and the answer satisfies it"`
	// Turns is the number of turns the CLI reported (Claude Code), or 0.
	Turns int `json:"turns,omitempty" jsonschema:"the number of agent turns, where the CLI reports it"`
	// Resources are what the run's processes used (invoker.Result.Resources:
	// peak memory in bytes, CPU time in nanoseconds, the most processes at
	// once, whether sampled, and what the limits did); absent when nothing
	// was started.
	Resources invoker.Resources `json:"resources,omitzero" jsonschema:"what the run's processes used: peak_memory (bytes), cpu_time (nanoseconds), peak_processes, sampled (from /proc rather than counted by the kernel), oom_kills, forks_refused"`
	// QueuedMS is how long the run waited before it started, in
	// milliseconds: for a slot of its identity and of the server
	// (Options.MaxConcurrentPerIdentity, MaxConcurrent), then for the
	// host's Budget (invoker.Result.Queued); not part of DurationMS.
	QueuedMS int64 `json:"queued_ms,omitempty" jsonschema:"how long the run waited for room on the host before it started, in milliseconds (not part of duration_ms)"`
	// Sandbox is the kernel sandbox that held the run's processes
	// (invoker.Result.Sandbox): "filesystem", "filesystem,network", or
	// absent where none held it.
	Sandbox string `json:"sandbox,omitempty" jsonschema:"the kernel sandbox that held the run: filesystem, or filesystem,network; absent where none held it"`
	// Connections are the run's connections the network rules saw
	// (invoker.Result.Connections), each summarized; absent where the
	// network rules did not hold the run.
	Connections []Connection `json:"connections,omitempty" jsonschema:"each connection the run's processes attempted under the sandbox's network rules"`
}

// Connection summarizes an invoker.Connection of a run: the destination,
// whether the rules let it through, and the bytes each way.
type Connection struct {
	// Host and Port name the destination as the process asked for it.
	Host string `json:"host" jsonschema:"the destination host as the process asked for it"`
	Port int    `json:"port" jsonschema:"the destination port"`
	// Allowed reports whether the rules let it through.
	Allowed bool `json:"allowed" jsonschema:"whether the sandbox's network rules let it through"`
	// Sent and Received count the bytes each way; zero when denied.
	Sent     int64 `json:"bytes_sent" jsonschema:"bytes sent; zero when denied"`
	Received int64 `json:"bytes_received" jsonschema:"bytes received; zero when denied"`
	// Error says why it was denied, or why an allowed one failed.
	Error string `json:"error,omitempty" jsonschema:"why it was denied, or why an allowed one failed"`
}

// connections summarizes a run's connections; nil for none.
func connections(cs []invoker.Connection) []Connection {
	if len(cs) == 0 {
		return nil
	}
	out := make([]Connection, len(cs))
	for i, c := range cs {
		out[i] = Connection{Host: c.Host, Port: c.Port, Allowed: c.Allowed, Sent: c.Sent, Received: c.Received, Error: c.Err}
	}
	return out
}

// ParallelInput is the argument of a parallel tool (named after the invoker
// with the suffix "_parallel").
type ParallelInput struct {
	// Tasks are the independent turns to run: 1 to Options.MaxTasks.
	Tasks []Input `json:"tasks"`
	// Workdir is the workdir of the tasks that give none.
	Workdir string `json:"workdir,omitempty"`
	// Permission is the permission of the tasks that give none; empty
	// means Options.DefaultPermission.
	Permission string `json:"permission,omitempty"`
	// Model is the model of the tasks that give none; empty means each
	// CLI's default.
	Model string `json:"model,omitempty"`
	// SystemPrompt is the system prompt addition of the tasks that give
	// none (Codex, Claude Code).
	SystemPrompt string `json:"system_prompt,omitempty"`
	// MaxParallel bounds how many tasks of this call run at once; zero
	// means all (Options.MaxConcurrent still applies).
	MaxParallel int `json:"max_parallel,omitempty"`
	// FailFast makes the first task that does not complete cancel the
	// tasks still running or waiting. Without it, a failure cancels
	// nothing.
	FailFast bool `json:"fail_fast,omitempty"`
}

// ParallelOutput is the structured content of a parallel tool's result.
type ParallelOutput struct {
	// Results holds one entry per task, in the order of the tasks.
	Results []TaskOutput `json:"results" jsonschema:"one result per task, in the order of the tasks"`
	// Completed counts the tasks of status "completed".
	Completed int `json:"completed"`
	// Failed counts the tasks of status "failed" or "refused".
	Failed int `json:"failed"`
	// Cancelled counts the tasks of status "cancelled": stopped by the
	// client, the server's shutdown or fail_fast, running or not started.
	Cancelled int `json:"cancelled"`
	// DurationMS is the wall time of the whole call in milliseconds.
	DurationMS int64 `json:"duration_ms" jsonschema:"wall time in milliseconds"`
}

// TaskOutput is the result of one task of a parallel call.
type TaskOutput struct {
	// Index is the task's position in the call's tasks, from 0.
	Index int `json:"index" jsonschema:"the task's position in tasks, from 0"`
	Output
}

// features says which optional inputs a CLI takes.
type features struct {
	model        bool
	resume       bool
	fork         bool
	images       bool
	systemPrompt bool
	outputSchema bool
	maxTurns     bool
	maxBudget    bool
}

// featuresOf returns the optional inputs of inv's tools: exactly the
// optional Request fields its backend declares (Invoker.Capabilities).
func featuresOf(inv invoker.Invoker) features {
	c := inv.Capabilities()
	return features{model: c.Model, resume: c.Resume, fork: c.Fork && c.Resume, images: c.Images, systemPrompt: c.SystemPrompt,
		outputSchema: c.OutputSchema, maxTurns: c.MaxTurns, maxBudget: c.MaxBudget}
}

// noExtra is the schema that matches nothing, as additionalProperties: it
// is how jsonschema-go spells false, and what it infers for structs.
func noExtra() *jsonschema.Schema { return &jsonschema.Schema{Not: &jsonschema.Schema{}} }

// propertyOrder lists the inputs in the order an LLM should read them.
var propertyOrder = []string{"prompt", "tasks", "workdir", "permission", "model", "session_id", "fork", "system_prompt", "images",
	"output_schema", "max_turns", "max_budget_usd", "max_parallel", "fail_fast"}

func ordered(props map[string]*jsonschema.Schema) []string {
	var out []string
	for _, k := range propertyOrder {
		if _, ok := props[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

func str(desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: desc}
}

func permissionSchema(c *config, def invoker.Permission, desc string) *jsonschema.Schema {
	s := str(desc)
	for _, p := range c.allowedPermissions() {
		s.Enum = append(s.Enum, string(p))
	}
	if def != "" {
		s.Default = json.RawMessage(fmt.Sprintf("%q", def))
	}
	return s
}

const permissionDesc = `Sandbox level for the agent: "read-only" (read files, run read-only commands), ` +
	`"workspace-write" (also edit files in workdir), "unlimited" (no approvals; the server's ` +
	`kernel sandbox, where it has one, may still hold the filesystem and network). ` +
	`Only the levels listed are allowed by this server.`

// taskProperties returns the properties shared by the single tool's input
// and a parallel task. In a task, workdir and permission default to the
// call's values, so they carry no schema default.
func taskProperties(c *config, f features, name string, inTask bool) map[string]*jsonschema.Schema {
	workdirDesc := "Absolute path of the directory the agent works in (its current directory)."
	if len(c.roots) > 0 {
		workdirDesc += " It must lie under one of: " + strings.Join(c.roots, ", ") + "."
	}
	var permDefault invoker.Permission = c.defaultPerm
	if inTask {
		workdirDesc += " Defaults to the call's workdir."
		permDefault = ""
	}
	props := map[string]*jsonschema.Schema{
		"prompt": {Type: "string", MinLength: jsonschema.Ptr(1),
			Description: "The task for the " + name + " agent, in plain language. It runs as one agent turn " +
				"and may take minutes; be specific about what to do and what to report back."},
		"workdir":    str(workdirDesc),
		"permission": permissionSchema(c, permDefault, permissionDesc),
	}
	if f.model {
		props["model"] = str("Model to use instead of the CLI's default; leave empty unless asked for a specific model.")
	}
	if f.resume {
		props["session_id"] = &jsonschema.Schema{Type: "string", Pattern: sessionIDPattern,
			Description: "Resume this earlier session (the session_id returned by a previous call, successful or not, " +
				"a UUID) instead of starting a new conversation. Use the same workdir as that call. " +
				`Only such ids are accepted: "latest", indexes and session names are refused.`}
	}
	if f.fork {
		props["fork"] = &jsonschema.Schema{Type: "boolean",
			Description: "With session_id: start a new conversation from a copy of that session's history, " +
				"leaving that session as it was (to try another direction from the same point). " +
				"The result's session_id is the new conversation's."}
	}
	if f.systemPrompt {
		props["system_prompt"] = str("Extra instructions for the agent's system prompt (optional).")
	}
	if f.images {
		props["images"] = &jsonschema.Schema{Type: "array", Items: str("Image file path, absolute or relative to workdir."),
			Description: "Image files to attach to the prompt (optional)."}
	}
	limitProperties(c, f, props)
	return props
}

func inputSchema(c *config, f features, name string) *jsonschema.Schema {
	props := taskProperties(c, f, name, false)
	return &jsonschema.Schema{
		Type:                 "object",
		Properties:           props,
		PropertyOrder:        ordered(props),
		Required:             []string{"prompt", "workdir"},
		AdditionalProperties: noExtra(),
	}
}

func parallelInputSchema(c *config, f features, name string) *jsonschema.Schema {
	taskProps := taskProperties(c, f, name, true)
	task := &jsonschema.Schema{
		Type:                 "object",
		Properties:           taskProps,
		PropertyOrder:        ordered(taskProps),
		Required:             []string{"prompt"},
		AdditionalProperties: noExtra(),
	}
	props := map[string]*jsonschema.Schema{
		"tasks": {Type: "array", Items: task, MinItems: jsonschema.Ptr(1), MaxItems: jsonschema.Ptr(c.maxTasks),
			Description: "The independent tasks to run, each as its own agent session. " +
				"Fields left out of a task take the call's values below."},
		"workdir":    str("Default workdir (absolute path) for tasks that give none."),
		"permission": permissionSchema(c, c.defaultPerm, "Default permission for tasks that give none. "+permissionDesc),
		"max_parallel": {Type: "integer", Minimum: jsonschema.Ptr(1.0),
			Description: "How many tasks may run at once (optional); the server's own limit applies as well."},
		"fail_fast": {Type: "boolean", Default: json.RawMessage("false"),
			Description: "If true, the first failed task cancels the tasks still running or waiting. " +
				"If false (the default), every task runs to its own end."},
	}
	if f.model {
		props["model"] = str("Default model for tasks that give none.")
	}
	if f.systemPrompt {
		props["system_prompt"] = str("Default system prompt addition for tasks that give none.")
	}
	return &jsonschema.Schema{
		Type:                 "object",
		Properties:           props,
		PropertyOrder:        ordered(props),
		Required:             []string{"tasks"},
		AdditionalProperties: noExtra(),
	}
}
