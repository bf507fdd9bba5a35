package driver_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// envBackend is echoBackend whose command adds and removes variables, and
// whose protocol records the environment it was given.
type envBackend struct {
	echoBackend
	got *[]string
}

func (envBackend) SessionCommand(*invoker.SessionRequest) (*driver.Command, error) {
	return &driver.Command{Env: []string{"CLINVOKE_T_BACKEND=backend", "CLINVOKE_T_SHARED=backend"}, Unset: []string{"CLINVOKE_T_UNSET"}}, nil
}

func (b envBackend) NewSessionProtocol(req *invoker.SessionRequest) driver.SessionProtocol {
	*b.got = slices.Clone(req.Env)
	return b.echoBackend.NewSessionProtocol(req)
}

// TestSessionProtocolSeesRunEnv checks that a session's protocol is given
// the environment the CLI runs with, not Request.Env alone: the host's
// (less what the command unsets), Options.Env, the command's variables
// and Request.Env, each variable once with its winning value. The
// protocols judge paths by it (a CLI's configuration home set in
// Options.Env is outside the working directory).
func TestSessionProtocolSeesRunEnv(t *testing.T) {
	t.Setenv("CLINVOKE_T_HOST", "host")
	t.Setenv("CLINVOKE_T_UNSET", "host")
	var got []string
	inv := driver.New(envBackend{echoBackend{caps: invoker.Capabilities{Sessions: true}}, &got},
		invoker.Options{Binary: "cat", Env: []string{"CLINVOKE_T_OPTIONS=options", "CLINVOKE_T_SHARED=options"}})
	s, err := inv.OpenSession(t.Context(), invoker.SessionRequest{Workdir: t.TempDir(),
		Env: []string{"CLINVOKE_T_REQUEST=request", "CLINVOKE_T_SHARED=request"}})
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	defer s.Close()
	vars := map[string][]string{}
	for _, kv := range got {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = append(vars[k], v)
	}
	for k, want := range map[string]string{
		"CLINVOKE_T_HOST": "host", "CLINVOKE_T_OPTIONS": "options", "CLINVOKE_T_BACKEND": "backend",
		"CLINVOKE_T_REQUEST": "request", "CLINVOKE_T_SHARED": "request",
	} {
		if v := vars[k]; len(v) != 1 || v[0] != want {
			t.Errorf("the protocol's environment holds %s=%q, want %q once", k, v, want)
		}
	}
	if v, ok := vars["CLINVOKE_T_UNSET"]; ok {
		t.Errorf("the protocol's environment holds CLINVOKE_T_UNSET=%q, which the command unsets", v)
	}
}
