package agenttest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
)

// CheckUnsupported checks that the backend of newInvoker declares each
// field of hints unsupported and that Invoke refuses it before anything
// starts, naming the field and giving the hint (a part of the advice of the
// backend's Hint). The binary is missing, so a request that got further
// would fail with ErrNotInstalled instead.
func CheckUnsupported(t *testing.T, newInvoker func(...invoker.Options) invoker.Invoker, hints map[string]string) {
	t.Helper()
	dir := t.TempDir()
	img := filepath.Join(dir, "a.png")
	if err := os.WriteFile(img, []byte("\x89PNG\r\n\x1a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set := map[string]func(*invoker.Request){
		"Model":        func(r *invoker.Request) { r.Model = "some-model" },
		"SessionID":    func(r *invoker.Request) { r.SessionID = "0199a213-81c0-7800-8aa1-bbab2a035a53" },
		"Images":       func(r *invoker.Request) { r.Images = []string{img} },
		"SystemPrompt": func(r *invoker.Request) { r.SystemPrompt = "be brief" },
		"OutputSchema": func(r *invoker.Request) { r.OutputSchema = json.RawMessage(`{"type":"object"}`) },
		"MaxTurns":     func(r *invoker.Request) { r.MaxTurns = 3 },
		"MaxBudgetUSD": func(r *invoker.Request) { r.MaxBudgetUSD = 1 },
	}
	inv := newInvoker(invoker.Options{Binary: filepath.Join(dir, "missing")})
	caps := inv.Capabilities()
	for field, hint := range hints {
		t.Run(field, func(t *testing.T) {
			if set[field] == nil {
				t.Fatalf("no test value for Request.%s: add one to CheckUnsupported", field)
			}
			if caps.Supports(field) {
				t.Fatalf("Capabilities().Supports(%q) = true, want false", field)
			}
			req := invoker.Request{Prompt: "x", Workdir: dir}
			set[field](&req)
			res, err := inv.Invoke(context.Background(), req)
			if !errors.Is(err, invoker.ErrUnsupported) || !errors.Is(err, invoker.ErrInvalidRequest) {
				t.Fatalf("Invoke() error = %v, want ErrUnsupported and ErrInvalidRequest", err)
			}
			for _, want := range []string{"Request." + field, hint} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Invoke() error = %q, want it to mention %q", err, want)
				}
			}
			if res == nil || res.ExitCode != -1 {
				t.Errorf("Invoke() Result = %+v, want ExitCode -1 (nothing started)", res)
			}
		})
	}
}
