package main

import (
	"flag"
	"strings"
	"testing"
)

func TestLimitsFlags(t *testing.T) {
	cases := []struct {
		args    []string
		memory  int64
		budget  int64
		wantErr string
	}{
		{args: []string{"-memory-max", "512M"}, memory: 512 << 20},
		{args: []string{"-memory-max", "2GiB", "-budget-memory", "8G"}, memory: 2 << 30, budget: 8 << 30},
		{args: []string{"-memory-max", "1.5g"}, memory: 3 << 29},
		{args: []string{"-memory-max", "1073741824"}, memory: 1 << 30},
		{args: []string{"-budget-memory", "8G"}, wantErr: "add -memory-max"},
		{args: []string{"-memory-max", "4G", "-budget-memory", "2G"}, wantErr: "more than -budget-memory 2GiB"},
		{args: []string{"-memory-max", "lots"}, wantErr: "want a size"},
		{args: []string{"-cpu", "-1"}, wantErr: "want a number of cores"},
		{args: []string{"-processes-max", "x"}, wantErr: "want a number of processes"},
		{args: []string{"-budget-runs", "-2"}, wantErr: "-budget-runs is negative"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var l limitFlags
			if !parseFlags(t, c.args, l.register, l.check, c.wantErr) {
				return
			}
			o := l.options()
			if o.Limits.Memory != c.memory || (c.budget != 0) != (o.Budget != nil) || o.Budget != nil && o.Budget.Memory != c.budget {
				t.Errorf("options = %+v (budget %+v), want memory %d, budget %d", o.Limits, o.Budget, c.memory, c.budget)
			}
		})
	}
}

// parseFlags parses args into a flag set that register filled, then runs
// check. It reports whether the flags are good, failing the test unless
// wantErr is empty and no error came, or wantErr is part of the error.
func parseFlags(t *testing.T, args []string, register func(*flag.FlagSet), check func() error, wantErr string) bool {
	t.Helper()
	fs := flag.NewFlagSet("mcpserver", flag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	register(fs)
	err := fs.Parse(args)
	if err == nil {
		err = check()
	}
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("error = %v, want one saying %q", err, wantErr)
		}
		return false
	}
	if err != nil {
		t.Fatalf("error = %v", err)
	}
	return true
}
