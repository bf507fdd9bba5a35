package invoker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// validate checks the fields of req that mean the same for every CLI. It
// runs before any process starts.
func validate(req *Request) error {
	if err := noNUL(req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return invalid("empty prompt: set Request.Prompt")
	}
	if req.Workdir == "" {
		return invalid("no workdir: set Request.Workdir to an absolute directory path")
	}
	if !filepath.IsAbs(req.Workdir) {
		return invalid("workdir %q is relative: Request.Workdir must be an absolute path", req.Workdir)
	}
	switch fi, err := os.Stat(req.Workdir); {
	case errors.Is(err, fs.ErrNotExist):
		return invalid("workdir %q does not exist: create it or pass an existing directory", req.Workdir)
	case err != nil:
		return invalid("workdir %q: %v", req.Workdir, err)
	case !fi.IsDir():
		return invalid("workdir %q is not a directory", req.Workdir)
	}
	if !req.Permission.Valid() {
		return invalid("unknown permission %q: use %q, %q or %q", string(req.Permission), ReadOnly, WorkspaceWrite, Unlimited)
	}
	for _, kv := range req.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return invalid("Request.Env entry %q is not KEY=VALUE", kv)
		}
	}
	return nil
}

// noNUL rejects a NUL byte in any field that reaches the CLI's argument
// list, environment or working directory: the kernel cannot pass one, and
// the start would fail with a bare "invalid argument". (The prompt goes on
// standard input, where any byte is fine.)
func noNUL(req *Request) error {
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
	}{{"Images", req.Images}, {"Env", req.Env}, {"ExtraArgs", req.ExtraArgs}} {
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
	for _, kv := range env {
		if strings.IndexByte(kv, 0) >= 0 {
			k, _, _ := strings.Cut(kv, "=")
			return invalid("environment variable %q holds a NUL byte (from WithEnv or the backend)", strings.ReplaceAll(k, "\x00", ""))
		}
	}
	return nil
}

// validateImages checks Request.Images. It runs after the backend's
// Command, so that a CLI that takes no images reports ErrUnsupported
// rather than a complaint about the paths.
func validateImages(req *Request) error {
	for _, img := range req.Images {
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
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
}

// lookPath resolves the CLI's executable. A missing binary is an error that
// matches ErrNotInstalled (and exec.ErrNotFound when looked up on PATH).
func (e *engine) lookPath() (string, error) {
	bin := e.cfg.binary
	if bin == "" {
		bin = e.b.Binary()
	}
	hint := e.b.InstallHint()
	if !strings.ContainsRune(bin, filepath.Separator) && !strings.ContainsRune(bin, '/') {
		p, err := exec.LookPath(bin)
		if err != nil {
			return "", fmt.Errorf("%w: %q is not on PATH; install it with `%s` or set its path with invoker.WithBinary (%w)", ErrNotInstalled, bin, hint, err)
		}
		return p, nil
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return "", fmt.Errorf("%w: %s; install it with `%s` or fix the path given to invoker.WithBinary (%w)", ErrNotInstalled, bin, hint, err)
	}
	if fi.IsDir() {
		return "", fmt.Errorf("%w: %s is a directory, not the CLI's executable", ErrNotInstalled, bin)
	}
	if _, err := exec.LookPath(bin); err != nil {
		return "", fmt.Errorf("%w: %s is not executable (%w)", ErrNotInstalled, bin, err)
	}
	return bin, nil
}
