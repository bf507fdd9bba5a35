package driver_test

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// sandboxSeer is echoBackend, no SandboxNester, recording the Sandbox
// that its Command, SessionCommand and NewSessionProtocol see.
type sandboxSeer struct {
	echoBackend
	mu   *sync.Mutex
	seen *[]string
	got  *[]invoker.Sandbox
}

func (b sandboxSeer) saw(call string, sb invoker.Sandbox) {
	b.mu.Lock()
	defer b.mu.Unlock()
	*b.seen = append(*b.seen, call)
	*b.got = append(*b.got, sb)
}

func (b sandboxSeer) Command(req *invoker.Request) (*driver.Command, error) {
	b.saw("Command", req.Sandbox)
	return b.echoBackend.Command(req)
}

func (b sandboxSeer) SessionCommand(req *invoker.SessionRequest) (*driver.Command, error) {
	b.saw("SessionCommand", req.Sandbox)
	return b.echoBackend.SessionCommand(req)
}

func (b sandboxSeer) NewSessionProtocol(req *invoker.SessionRequest) driver.SessionProtocol {
	b.saw("NewSessionProtocol", req.Sandbox)
	return b.echoBackend.NewSessionProtocol(req)
}

// TestSandboxBackendSees: every backend, not only a SandboxNester, sees
// in its requests the sandbox the run's check decided, Options.Sandbox
// merged in: Mode "required" with the rules in force where the kernel
// holds the run (also when only the Options ask for it), "off" where the
// run asks for none; in the one-shot run and in a session alike.
func TestSandboxBackendSees(t *testing.T) {
	requireSandbox(t)
	hidden := t.TempDir()
	for _, tc := range []struct {
		name      string
		opts, req invoker.Sandbox
		want      invoker.Sandbox
	}{
		{"none asked", invoker.Sandbox{}, invoker.Sandbox{}, invoker.Sandbox{Mode: "off"}},
		{"request", invoker.Sandbox{}, invoker.Sandbox{Mode: "required"}, invoker.Sandbox{Mode: "required"}},
		{"available", invoker.Sandbox{}, invoker.Sandbox{Mode: "available"}, invoker.Sandbox{Mode: "required"}},
		{"Options only", invoker.Sandbox{Mode: "required", Hide: []string{hidden}}, invoker.Sandbox{},
			invoker.Sandbox{Mode: "required", Hide: []string{hidden}}},
		{"Options, off in the request", invoker.Sandbox{Mode: "required"}, invoker.Sandbox{Mode: "off"}, invoker.Sandbox{Mode: "off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu   sync.Mutex
				seen []string
				got  []invoker.Sandbox
			)
			b := sandboxSeer{echoBackend: echoBackend{}, mu: &mu, seen: &seen, got: &got}
			inv := driver.New(b, invoker.Options{Sandbox: tc.opts})
			work := t.TempDir()
			res, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "p", Workdir: work, Sandbox: tc.req})
			if err != nil {
				t.Fatalf("Invoke() error = %v", err)
			}
			wantHeld := map[string]string{"off": "", "required": "filesystem"}[tc.want.Mode]
			if res.Sandbox != wantHeld {
				t.Errorf("Invoke: Result.Sandbox = %q, want %q", res.Sandbox, wantHeld)
			}
			s, err := inv.OpenSession(context.Background(), invoker.SessionRequest{Workdir: work, Sandbox: tc.req})
			if err != nil {
				t.Fatalf("OpenSession() error = %v", err)
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close() = %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []string{"Command", "SessionCommand", "NewSessionProtocol"}; !reflect.DeepEqual(seen, want) {
				t.Fatalf("the backend was called %v, want %v", seen, want)
			}
			for i, sb := range got {
				if !reflect.DeepEqual(sb, tc.want) {
					t.Errorf("%s saw %+v, want %+v", seen[i], sb, tc.want)
				}
			}
		})
	}
}
