package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/clinvoke/clinvoke/internal/mcphost"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/google/jsonschema-go/jsonschema"
)

// The checks of a request, made once at the entry of each call before
// anything starts: Invoke checks its Request whole (checkRequest),
// OpenSession the conversation (checkConversation), Session.Turn the turn
// (session.checkTurn). Their errors match ErrInvalidRequest, and name the
// field and the fix; a required sandbox the host cannot hold is refused
// there too, with ErrSandbox.

// checked is what the check of a conversation decided, carried to its
// run: the resolved OutputSchema (nil when none is set) and the sandbox.
type checked struct {
	schema  *jsonschema.Resolved
	sandbox sandboxAsk
}

// checkRequest checks req, a whole run of Invoke: its conversation, its
// turn and the fields its CLI supports. The images are checked once the
// backend's Command has taken the request (validateImages).
func (e *engine) checkRequest(req *invoker.Request) (checked, error) {
	sreq, turn := req.Session(), req.Turn()
	c, err := e.checkSession(&sreq)
	if err != nil {
		return checked{}, err
	}
	if err := checkTurn(&turn); err != nil {
		return checked{}, err
	}
	if err := e.checkSupported(req); err != nil {
		return checked{}, err
	}
	return c, nil
}

// checkConversation checks the settings of a session, and the fields its
// CLI supports.
func (e *engine) checkConversation(req *invoker.SessionRequest) (checked, error) {
	c, err := e.checkSession(req)
	if err != nil {
		return checked{}, err
	}
	full := req.Request(invoker.TurnRequest{})
	return c, e.checkSupported(&full)
}

// checkTurn checks a turn of the session: its prompt, its switches of
// model and permission, the fields its CLI supports, and its images.
func (s *session) checkTurn(t *invoker.TurnRequest) error {
	if err := checkTurn(t); err != nil {
		return err
	}
	if err := s.checkSwitch(t); err != nil {
		return err
	}
	full := s.sreq.Request(*t)
	if err := s.e.checkSupported(&full); err != nil {
		return err
	}
	return validateImages(t.Images)
}

// asInvalid returns err, a backend's refusal of a request, as an error
// that matches ErrInvalidRequest.
func asInvalid(err error) error {
	if errors.Is(err, invoker.ErrInvalidRequest) {
		return err
	}
	return fmt.Errorf("%w: %w", invoker.ErrInvalidRequest, err)
}

// checkSession checks the settings of a conversation (of a session, or of
// a one-turn run) that mean the same for every CLI, and returns what it
// decided: the resolved OutputSchema and the sandbox. It runs before any
// process starts, and before the conversation waits for the Budget or
// hosts its Go MCP servers; its errors match ErrInvalidRequest, or
// ErrSandbox for a required sandbox the host cannot hold.
func (e *engine) checkSession(req *invoker.SessionRequest) (checked, error) {
	if err := noNUL(req); err != nil {
		return checked{}, err
	}
	if req.Workdir == "" {
		return checked{}, invalid("no workdir: set Request.Workdir to an absolute directory path")
	}
	if !filepath.IsAbs(req.Workdir) {
		return checked{}, invalid("workdir %q is relative: Request.Workdir must be an absolute path", req.Workdir)
	}
	switch fi, err := os.Stat(req.Workdir); {
	case errors.Is(err, fs.ErrNotExist):
		return checked{}, invalid("workdir %q does not exist: create it or pass an existing directory", req.Workdir)
	case err != nil:
		return checked{}, invalid("workdir %q: %v", req.Workdir, err)
	case !fi.IsDir():
		return checked{}, invalid("workdir %q is not a directory", req.Workdir)
	}
	if !req.Permission.Valid() {
		return checked{}, invalid("unknown permission %q: use %q, %q or %q", string(req.Permission), invoker.ReadOnly, invoker.WorkspaceWrite, invoker.Unlimited)
	}
	if req.Fork && req.SessionID == "" {
		return checked{}, invalid("Request.Fork without Request.SessionID: set SessionID to the conversation to fork")
	}
	for i, kv := range req.Env {
		if problem := mcphost.EnvProblem(kv); problem != "" {
			return checked{}, invalid("Request.Env[%d] %s", i, problem)
		}
	}
	if err := checkMCPServers(req.MCPServers); err != nil {
		return checked{}, err
	}
	if _, err := e.cfg.want(); err != nil {
		return checked{}, err
	}
	if err := e.checkLimits(req.Limits); err != nil {
		return checked{}, err
	}
	sb, err := e.sandboxFor(req.Sandbox, req.Permission)
	if err != nil {
		return checked{}, err
	}
	schema, err := compileSchema(req)
	if err != nil {
		return checked{}, err
	}
	return checked{schema: schema, sandbox: sb}, nil
}

// checkTurn checks one turn: a prompt that is not blank, and no NUL byte
// in an image path. (The prompt goes on standard input, where any byte is
// fine.)
func checkTurn(t *invoker.TurnRequest) error {
	if i := strings.IndexByte(t.Model, 0); i >= 0 {
		return invalid("TurnRequest.Model holds a NUL byte at offset %d: remove it", i)
	}
	for n, v := range t.Images {
		if i := strings.IndexByte(v, 0); i >= 0 {
			return invalid("Request.Images[%d] holds a NUL byte at offset %d: a process argument cannot carry one; remove it", n, i)
		}
	}
	if strings.TrimSpace(t.Prompt) == "" {
		return invalid("empty prompt: set Request.Prompt")
	}
	return nil
}

// checkSupported refuses a request that sets a field the backend does not
// support, naming the field and what to do instead. The fields are those
// invoker.Capabilities lists, found in the Request by their names.
func (e *engine) checkSupported(req *invoker.Request) error {
	for _, f := range e.b.Capabilities().Unsupported() {
		if sets(req, f) {
			return &unsupportedError{field: f, hint: e.b.Hint(f)}
		}
	}
	return e.checkTwoWay(req)
}

// sets reports whether req sets its field named field. MCPServers counts
// the servers of other programs only: a Go server needs GoTools instead
// (checkTwoWay).
func sets(req *invoker.Request, field string) bool {
	if field == "MCPServers" {
		return slices.ContainsFunc(req.MCPServers, func(s invoker.MCPServer) bool { return s.Server == nil })
	}
	f := reflect.ValueOf(req).Elem().FieldByName(field)
	return f.IsValid() && !f.IsZero()
}

// noNUL rejects a NUL byte in any field that reaches the CLI's argument
// list, environment or working directory: the kernel cannot pass one, and
// the start would fail with a bare "invalid argument".
func noNUL(req *invoker.SessionRequest) error {
	fields := []struct {
		name  string
		value string
	}{
		{"Workdir", req.Workdir}, {"Model", req.Model}, {"SessionID", req.SessionID},
		{"SystemPrompt", req.SystemPrompt}, {"Permission", string(req.Permission)},
	}
	for _, f := range fields {
		if i := strings.IndexByte(f.value, 0); i >= 0 {
			return invalid("Request.%s holds a NUL byte at offset %d: a process argument cannot carry one; remove it", f.name, i)
		}
	}
	for _, list := range []struct {
		name   string
		values []string
	}{{"Env", req.Env}, {"ExtraArgs", req.ExtraArgs}} {
		for n, v := range list.values {
			if i := strings.IndexByte(v, 0); i >= 0 {
				return invalid("Request.%s[%d] holds a NUL byte at offset %d: a process argument or environment entry cannot carry one; remove it", list.name, n, i)
			}
		}
	}
	return nil
}

// commandNoNUL is the last check of what reaches the kernel: the
// backend's arguments and environment and the options' environment.
func commandNoNUL(cmd *Command, env []string) error {
	for n, a := range cmd.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return invalid("argument %d of the CLI's command line holds a NUL byte", n+1)
		}
	}
	for n, kv := range env {
		if strings.IndexByte(kv, 0) >= 0 {
			if k, _, ok := strings.Cut(kv, "="); ok {
				return invalid("environment variable %q holds a NUL byte (from Options.Env or the backend)", strings.ReplaceAll(k, "\x00", ""))
			}
			return invalid("environment entry %d holds a NUL byte (from Options.Env or the backend)", n)
		}
	}
	return nil
}

// validateImages checks Request.Images. It runs after the backend's
// Command, so that a CLI that takes no images reports ErrUnsupported
// rather than a complaint about the paths.
func validateImages(images []string) error {
	for _, img := range images {
		if !filepath.IsAbs(img) {
			return invalid("image %q is relative: Request.Images must hold absolute paths", img)
		}
		if fi, err := os.Stat(img); err != nil || fi.IsDir() {
			return invalid("image %q is not a readable file", img)
		}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{invoker.ErrInvalidRequest}, args...)...)
}
