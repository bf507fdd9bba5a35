package driver

import (
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// Options fold as documented: each non-zero field of a later Options
// replaces the same field of an earlier one, Env is appended, and a bool,
// whose zero value means "not set", is switched on by any of them and
// never off.
func TestMergeOptions(t *testing.T) {
	o := merge([]invoker.Options{
		{Binary: "a", IdleTimeout: time.Minute, Env: []string{"A=1"}, PTY: true, SweepEveryTurn: true},
		{Binary: "b", Env: []string{"B=2"}, PTY: false, Subreaper: true},
		{IdleTimeout: -1},
	})
	if o.Binary != "b" || o.IdleTimeout != -1 {
		t.Errorf("merge: Binary %q, IdleTimeout %v; want the later non-zero values \"b\", -1", o.Binary, o.IdleTimeout)
	}
	if len(o.Env) != 2 || o.Env[0] != "A=1" || o.Env[1] != "B=2" {
		t.Errorf("merge: Env = %q, want both, in order", o.Env)
	}
	if !o.PTY || !o.Subreaper || !o.SweepEveryTurn {
		t.Errorf("merge: PTY %v, Subreaper %v, SweepEveryTurn %v; want each true, as some Options set it", o.PTY, o.Subreaper, o.SweepEveryTurn)
	}
}
