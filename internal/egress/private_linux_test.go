package egress

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// TestSandboxNetPrivateWhy: where the first stage of WrapPrivate cannot
// give the run its private /tmp and /dev/shm (here: the descriptor it is
// given is no Landlock ruleset), the host learns why, not only that.
func TestSandboxNetPrivateWhy(t *testing.T) {
	defer goleak.VerifyNone(t)
	if _, err := sandbox.Probe(); err != nil {
		t.Skipf("no Landlock here: %v", err)
	}
	if err := ProbeWrap(); err != nil {
		t.Skipf("this host gives no unprivileged user namespace: %v", err)
	}
	n, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	notRuleset, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer notRuleset.Close()
	cmd := exec.Command("/bin/true")
	if err := n.WrapPrivate(cmd, notRuleset, []byte(`{"binds":[]}`)); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serr := n.Started()
	// The stage then fails to apply the ruleset and exits 127.
	if err := cmd.Wait(); err == nil {
		t.Error("the command ran without its ruleset")
	}
	if serr != nil {
		t.Fatal(serr)
	}
	held, why := n.PrivateHeld(), n.PrivateWhy()
	if held || !strings.Contains(why, "landlock_add_rule") {
		t.Errorf("PrivateHeld() = %v, PrivateWhy() = %q; want false and the first stage's reason", held, why)
	}
	t.Logf("the first stage's reason: %s", why)
}
