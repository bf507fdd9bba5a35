package invokertest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// The README's Approve example ("Two-way control") refuses rm at
// Unlimited, where every CLI asks Approve about commands: the callback
// sees the command and the file stays. It looks for rm among the words of
// the command, not at its start: Codex reports a command as its shell
// runs it (/bin/bash -lc 'rm -f victim'). At WorkspaceWrite only Codex asks
// (inside its sandbox); Claude Code's Bash and Gemini CLI's shell are
// above the level and refused before Approve is asked, which is what the
// README says.
func TestReadmeApproveSeesCommands(t *testing.T) {
	backends := map[string]func(...invoker.Options) invoker.Invoker{"codex": codex.New, "gemini": gemini.New, "claude": claude.New}
	for cli, newInvoker := range backends {
		for _, perm := range []invoker.Permission{invoker.Unlimited, invoker.WorkspaceWrite} {
			t.Run(cli+"/"+string(perm), func(t *testing.T) {
				workdir := t.TempDir()
				victim := filepath.Join(workdir, "victim")
				write(t, victim, "keep me\n")
				var asked []string
				agent := invokertest.Agent{CLI: cli, Ask: "rm -f victim"}
				res, err := newInvoker(agent.Options()).Invoke(t.Context(), invoker.Request{
					Prompt: "Tidy up.", Workdir: workdir, Permission: perm,
					Approve: func(ctx context.Context, a invoker.Approval) invoker.Decision { // as in the README
						asked = append(asked, a.Command)
						words := strings.FieldsFunc(a.Command, func(r rune) bool { return strings.ContainsRune(" \t\n;&|()`$'\"", r) })
						if a.Kind == invoker.ApprovalCommand && slices.Contains(words, "rm") {
							return invoker.Decision{Message: "never delete files; move them to ./trash"}
						}
						return invoker.Decision{Allow: true}
					},
				})
				if err != nil || !strings.HasPrefix(res.Text, "denied") {
					t.Fatalf("Invoke() = %q, %v; want a denial (asked %q)", res.Text, err, asked)
				}
				if _, err := os.Stat(victim); err != nil {
					t.Errorf("the file is gone: %v", err)
				}
				wantAsked := perm == invoker.Unlimited || cli == "codex"
				if got := len(asked) > 0; got != wantAsked {
					t.Errorf("Approve asked %q; want it asked: %v", asked, wantAsked)
				}
			})
		}
	}
}

// The README's "Testing your code" snippet, copied as it stands into a
// fresh module that has only a replace directive to this repository,
// passes go test on a machine with no agent CLI on PATH: that is how a
// user's first test of their own code runs.
func TestReadmeTestingSnippet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own: not part of the quick subset")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	snippet := readmeSnippet(t, filepath.Join(root, "README.md"), "<!-- testing-snippet")

	dir := t.TempDir()
	// The user's go.mod is as go get and go mod tidy leave it: at this
	// module's Go version, requiring this module's requirements. (Short
	// of that, the go command loads the go.mod files of the whole module
	// graph, some of which only go mod download puts in the module
	// cache: the test failed from a fresh clone.)
	goDirective, requires := goModParts(t, filepath.Join(root, "go.mod"))
	gomod := "module example.com/summary\n\n" + goDirective + "\n\nrequire github.com/clinvoke/clinvoke v0.0.0\n\n" + requires +
		"replace github.com/clinvoke/clinvoke => " + root + "\n"
	write(t, filepath.Join(dir, "go.mod"), gomod)
	write(t, filepath.Join(dir, "summary_test.go"), snippet)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "go.sum"), string(sum))

	gobin := filepath.Join(runtime.GOROOT(), "bin")
	// Only Go on PATH: no agent CLI, and no module download (the
	// repository's own dependencies are in the module cache).
	env := append(os.Environ(), "PATH="+gobin, "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0")
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	defer cancel()
	for _, args := range [][]string{{"test", "-count=1", "./..."}} {
		cmd := exec.CommandContext(ctx, filepath.Join(gobin, "go"), args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in a fresh module: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("go %s:\n%s", strings.Join(args, " "), out)
		if args[0] == "test" && !bytes.Contains(out, []byte("ok")) {
			t.Fatalf("go test in a fresh module printed no ok:\n%s", out)
		}
	}
}

// readmeSnippet returns the Go code block that follows the line starting
// with marker in the Markdown file path.
func readmeSnippet(t *testing.T, path, marker string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+marker)
	if i < 0 {
		t.Fatalf("%s has no line starting %q", path, marker)
	}
	s = s[i+1:]
	start := strings.Index(s, "```go\n")
	if start < 0 {
		t.Fatalf("%s: no Go block after %q", path, marker)
	}
	s = s[start+len("```go\n"):]
	end := strings.Index(s, "\n```")
	if end < 0 {
		t.Fatalf("%s: the Go block after %q does not end", path, marker)
	}
	return s[:end+1]
}

// goModParts returns the go directive of the go.mod file path, as in
// "go 1.26.0", and its require blocks, each followed by a blank line.
func goModParts(t *testing.T, path string) (goDirective, requires string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var req strings.Builder
	in := false
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "go "):
			goDirective = line
		case line == "require (":
			in = true
			req.WriteString(line + "\n")
		case in:
			req.WriteString(line + "\n")
			if line == ")" {
				in = false
				req.WriteString("\n")
			}
		}
	}
	if goDirective == "" || req.Len() == 0 {
		t.Fatalf("%s has no go directive or no require block", path)
	}
	return goDirective, req.String()
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
