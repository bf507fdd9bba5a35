package main

import (
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/mcpadapter"
)

func TestTaskFlags(t *testing.T) {
	cases := []struct {
		args    []string
		lease   time.Duration
		replica string
		wantErr string
	}{
		{args: nil, lease: mcpadapter.DefaultTaskLease},
		{args: []string{"-task-lease", "2m", "-replica", "mcp-1"}, lease: 2 * time.Minute, replica: "mcp-1"},
		{args: []string{"-task-abandon", "-1s"}, lease: mcpadapter.DefaultTaskLease},
		{args: []string{"-task-abandon", "0"}, wantErr: "-task-abandon 0"},
		{args: []string{"-task-ttl", "0"}, wantErr: "-task-ttl"},
		{args: []string{"-task-poll", "-1s"}, wantErr: "-task-poll"},
		{args: []string{"-task-lease", "0"}, wantErr: "-task-lease 0s"},
		{args: []string{"-task-lease", "-30s"}, wantErr: "-task-lease -30s"},
		{args: []string{"-task-lease", "2ns"}, wantErr: "-task-lease 2ns"},
		{args: []string{"-task-lease", "soon"}, wantErr: "-task-lease"},
		{args: []string{"-replica", " mcp-1"}, wantErr: `-replica " mcp-1"`},
		{args: []string{"-replica", "mcp\n1"}, wantErr: `-replica "mcp\n1"`},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var f taskFlags
			var o mcpadapter.TaskOptions
			check := func() (err error) {
				o, err = f.options()
				return err
			}
			if !parseFlags(t, c.args, f.register, check, c.wantErr) {
				return
			}
			if o.Lease != c.lease || o.Replica != c.replica {
				t.Errorf("options = %+v, want lease %v, replica %q", o, c.lease, c.replica)
			}
		})
	}
}
