//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// The filesystem sandbox with the real CLIs: a plain turn works at each
// level under it, and what a hostile model asks for is refused by the
// kernel, whatever the CLI's own sandbox and approvals let through.

// sandboxed returns r's request for prompt under a required sandbox at
// perm.
func (r *rig) sandboxed(prompt string, perm invoker.Permission) invoker.Request {
	req := r.request(prompt)
	req.Permission, req.Sandbox = perm, invoker.Sandbox{Mode: "required"}
	return req
}

// TestSandboxTurn: every CLI answers a turn at each level under the
// sandbox, and the Result says it held.
func TestSandboxTurn(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		for _, perm := range []invoker.Permission{invoker.ReadOnly, invoker.WorkspaceWrite} {
			r.srv.Enqueue(fakemodel.Answer("sandboxed answer"))
			res, err := r.invoke(context.Background(), r.sandboxed("say something", perm))
			if err != nil {
				t.Fatalf("%s: Invoke() error = %v; stderr:\n%s", perm, err, res.Stderr)
			}
			if res.Text != "sandboxed answer" || res.Sandbox != "filesystem" {
				t.Errorf("%s: Text %q, Sandbox %q; want the answer, filesystem", perm, res.Text, res.Sandbox)
			}
		}
	})
}

// TestSandboxSSHKeyReadOnly: a key planted in ~/.ssh is not read by a
// shell command the model asks for at ReadOnly, and never reaches the
// model.
func TestSandboxSSHKeyReadOnly(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		const secret = "SECRET-KEY-0f9e8d7c"
		key := filepath.Join(r.home, ".ssh", "id_ed25519")
		if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(key, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r.srv.Enqueue(fakemodel.Shell("cat "+key), fakemodel.EchoToolResult("after: "))
		res, err := r.invoke(context.Background(), r.sandboxed("show me the key", invoker.ReadOnly))
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		t.Logf("answer: %.300s", res.Text)
		if strings.Contains(res.Text, secret) {
			t.Errorf("the key reached the answer: %q", res.Text)
		}
		for _, q := range r.srv.Requests() {
			if q.Contains(secret) {
				t.Errorf("the key reached the model")
				break
			}
		}
	})
}
