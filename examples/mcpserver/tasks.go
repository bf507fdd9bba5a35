package main

import (
	"flag"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/clinvoke/clinvoke/mcpadapter"
)

// taskFlags are the flags of the MCP tasks: tool calls a client augments
// with a task, whose runs outlive the client's connection.
type taskFlags struct {
	opts mcpadapter.TaskOptions
}

// register adds the flags to fs.
func (f *taskFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.opts.Disabled, "no-tasks", false, "serve a call that asks for a task as a plain call: no tasks capability")
	fs.DurationVar(&f.opts.TTL, "task-ttl", mcpadapter.DefaultTaskTTL, "how long a task's result is kept after the task ends, for a client that asks for no ttl")
	fs.DurationVar(&f.opts.MaxTTL, "task-max-ttl", mcpadapter.DefaultTaskMaxTTL, "the longest ttl a client may ask for")
	fs.DurationVar(&f.opts.AbandonAfter, "task-abandon", mcpadapter.DefaultTaskAbandonAfter,
		"cancel a task's run when no client asked about it (tasks/get, tasks/result, tasks/list) for this long (negative: never)")
	fs.DurationVar(&f.opts.PollInterval, "task-poll", mcpadapter.DefaultTaskPollInterval, "the interval between two tasks/get that a task suggests to its client")
	fs.DurationVar(&f.opts.Lease, "task-lease", mcpadapter.DefaultTaskLease,
		"how long a running task's record stays valid unless this server renews it (every third of it); the same on every replica sharing a task store, well above its latency")
	fs.StringVar(&f.opts.Replica, "replica", "", "the name of this server in the records of the tasks it runs (default: the host name and process id)")
}

// minTaskLease is the shortest -task-lease: the lease is renewed every
// third of it, and a lease shorter than a store's round trip lapses
// while it is renewed.
const minTaskLease = time.Millisecond

// options returns the tasks' options, checked.
func (f *taskFlags) options() (mcpadapter.TaskOptions, error) {
	if f.opts.AbandonAfter == 0 {
		return f.opts, fmt.Errorf("-task-abandon 0: give a duration, or a negative one to never abandon a task")
	}
	if f.opts.TTL <= 0 || f.opts.MaxTTL <= 0 || f.opts.PollInterval <= 0 {
		return f.opts, fmt.Errorf("-task-ttl, -task-max-ttl and -task-poll must be positive durations (such as %v)", time.Minute)
	}
	if f.opts.Lease < minTaskLease {
		return f.opts, fmt.Errorf("-task-lease %v: give a duration of at least %v, well above the task store's latency (such as %v)", f.opts.Lease, minTaskLease, mcpadapter.DefaultTaskLease)
	}
	if r := f.opts.Replica; strings.TrimSpace(r) != r || strings.ContainsFunc(r, func(c rune) bool { return !unicode.IsPrint(c) }) {
		return f.opts, fmt.Errorf("-replica %q: give a name of printable characters without surrounding spaces, or none for the host name and process id", r)
	}
	return f.opts, nil
}
