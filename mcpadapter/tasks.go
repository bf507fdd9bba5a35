package mcpadapter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// Defaults of [TaskOptions].
const (
	// DefaultTaskTTL is how long a task's result is kept after the task
	// ends, when the client asks for no ttl.
	DefaultTaskTTL = time.Hour

	// DefaultTaskMaxTTL is the longest ttl a client may ask for; a larger
	// one is lowered to it.
	DefaultTaskMaxTTL = 24 * time.Hour

	// DefaultTaskAbandonAfter is how long a task may run without any
	// client asking about it (tasks/get, tasks/result, tasks/list) before
	// it is cancelled as abandoned.
	DefaultTaskAbandonAfter = 10 * time.Minute

	// DefaultTaskPollInterval is the interval between two tasks/get that
	// a task suggests to its client.
	DefaultTaskPollInterval = DefaultProgressInterval

	// DefaultTaskLease is how long a running task's record stays valid
	// without the replica running it renewing it.
	DefaultTaskLease = 30 * time.Second
)

// TaskOptions configures the tasks of the tools: tool calls that a client
// augments with a task (MCP 2025-11-25), which return a task at once and
// whose run goes on without the client's connection. The zero value
// enables tasks with the defaults.
type TaskOptions struct {
	// Disabled turns tasks off: the server declares no tasks capability
	// and serves a task-augmented call as a plain one.
	Disabled bool

	// TTL is how long a task and its result are kept after the task ends,
	// for a client that asks for no ttl; a client's ttl (in milliseconds)
	// replaces it, up to MaxTTL. The task is then deleted: tasks/get and
	// tasks/result answer that it does not exist. If zero,
	// DefaultTaskTTL is used.
	TTL time.Duration

	// MaxTTL bounds the ttl a client may ask for. If zero,
	// DefaultTaskMaxTTL is used.
	MaxTTL time.Duration

	// AbandonAfter bounds how long a task may run without a client
	// asking about it: when no tasks/get, tasks/result or tasks/list has
	// named it for this long, its run is cancelled with ErrTaskAbandoned
	// as the cause (in the transcript and the span), and it ends
	// "cancelled", saying why. A client blocked in tasks/result is asking
	// all the while. If zero, DefaultTaskAbandonAfter is used; a negative
	// value never abandons a task.
	AbandonAfter time.Duration

	// PollInterval is the interval between two tasks/get that a task
	// suggests to its client. If zero, DefaultTaskPollInterval is used.
	PollInterval time.Duration

	// Store keeps the records of the tasks. If nil, a [MemoryTaskStore]
	// is used.
	Store TaskStore

	// Replica names this process in the records of the tasks it runs
	// (TaskRecord.Replica). If empty, the host name and the process id
	// are used.
	Replica string

	// Lease bounds how long the record of a running task stays valid
	// without its replica renewing it: the replica running the task
	// renews it every Lease/3 while the run goes on. A replica sharing
	// the store that reads a running task whose lease has passed (the
	// replica running it was killed, or lost the store) records the task
	// "failed", with ErrTaskReplicaLost as the cause, instead of leaving
	// it "working" forever. Give the replicas sharing a store the same
	// Lease, well above the store's worst latency; it is at least a
	// millisecond. If zero, DefaultTaskLease is used.
	Lease time.Duration
}

// minTaskLease is the shortest TaskOptions.Lease: the owner renews a
// lease every third of it, which must stay a positive interval.
const minTaskLease = time.Millisecond

// check applies the defaults of o.
func (o *TaskOptions) check() error {
	if o.TTL < 0 {
		return fmt.Errorf("TTL is %v: give a positive duration, or 0 for %v", o.TTL, DefaultTaskTTL)
	}
	if o.MaxTTL < 0 {
		return fmt.Errorf("MaxTTL is %v: give a positive duration, or 0 for %v", o.MaxTTL, DefaultTaskMaxTTL)
	}
	if o.Lease < 0 || (o.Lease > 0 && o.Lease < minTaskLease) {
		return fmt.Errorf("Lease is %v: give a duration of at least %v, well above the task store's latency, or 0 for %v", o.Lease, minTaskLease, DefaultTaskLease)
	}
	if o.PollInterval < 0 {
		return fmt.Errorf("PollInterval is %v: give a positive duration, or 0 for %v", o.PollInterval, DefaultTaskPollInterval)
	}
	if o.TTL == 0 {
		o.TTL = DefaultTaskTTL
	}
	if o.MaxTTL == 0 {
		o.MaxTTL = DefaultTaskMaxTTL
	}
	if o.TTL > o.MaxTTL {
		return fmt.Errorf("TTL %v exceeds MaxTTL %v", o.TTL, o.MaxTTL)
	}
	if o.AbandonAfter == 0 {
		o.AbandonAfter = DefaultTaskAbandonAfter
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultTaskPollInterval
	}
	if o.Store == nil {
		o.Store = NewMemoryTaskStore()
	}
	if o.Lease == 0 {
		o.Lease = DefaultTaskLease
	}
	if o.Replica == "" {
		host, _ := os.Hostname()
		o.Replica = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	return nil
}

// Task statuses, as MCP names them.
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// ErrTaskCancelled is the cancellation cause (context.Cause) of a run whose
// task the client cancelled with tasks/cancel. Like ErrShuttingDown, it
// matches context.Canceled.
var ErrTaskCancelled error = &cancelCause{"cancelled by the client (tasks/cancel)"}

// ErrTaskAbandoned is the cancellation cause of a run whose task no client
// asked about for TaskOptions.AbandonAfter. It matches context.Canceled.
var ErrTaskAbandoned error = &cancelCause{"abandoned: no client asked about the task within its abandonment bound (TaskOptions.AbandonAfter)"}

// ErrTaskReplicaLost is the cause of a task recorded "failed" because the
// replica running it stopped renewing its lease (TaskOptions.Lease): the
// replica was killed, or lost the store. Call the tool again.
var ErrTaskReplicaLost = errors.New("the replica running the task stopped answering: its lease lapsed without renewal (TaskOptions.Lease); call the tool again")

// ErrTaskNotFound is what a TaskStore returns for a task it does not hold.
var ErrTaskNotFound = errors.New("task not found")

// A TaskRecord is what a [TaskStore] keeps of one task: its state as
// tasks/get reports it, and once it ended, the result tasks/result returns.
type TaskRecord struct {
	// ID is the task id: 26 random base-32 characters (130 bits).
	ID string
	// Owner is the identity that created the task ("" without
	// authentication); only it may see the task.
	Owner string
	// Tool is the name of the tool called.
	Tool string
	// Status is one of TaskWorking, TaskInputRequired, TaskCompleted,
	// TaskFailed and TaskCancelled.
	Status string
	// StatusMessage is the latest progress message while the task runs,
	// and what happened once it ended.
	StatusMessage string
	// Created and Updated are when the task was created and last changed.
	Created, Updated time.Time
	// TTL is how long the task is kept after it ends.
	TTL time.Duration
	// Result is the JSON of the tool call's result (a CallToolResult) once
	// the task ended with one.
	Result []byte
	// ErrorCode and ErrorMessage are the JSON-RPC error of a task whose
	// call ended with one instead of a result.
	ErrorCode    int64
	ErrorMessage string
	// Replica names the process that runs the task (TaskOptions.Replica).
	Replica string
	// LeaseUntil is, while the task runs, when its record lapses unless
	// Replica renews it; it is zero once the end of the run is recorded.
	LeaseUntil time.Time
}

// Terminal reports whether the task ended.
func (r *TaskRecord) Terminal() bool {
	return r.Status == TaskCompleted || r.Status == TaskFailed || r.Status == TaskCancelled
}

// A TaskStore keeps the records of tasks. The adapter saves a task's
// record when it is created, when its status changes, every third of
// TaskOptions.Lease while it runs (renewing its lease) and when it ends,
// and deletes it TTL after its end. Its methods may be called
// concurrently.
type TaskStore interface {
	// Save creates or replaces the record of r.ID. The store may keep r:
	// the adapter does not change a record after saving it.
	Save(ctx context.Context, r *TaskRecord) error
	// Load returns the record of id, or ErrTaskNotFound.
	Load(ctx context.Context, id string) (*TaskRecord, error)
	// List returns the records of owner's tasks, oldest first.
	List(ctx context.Context, owner string) ([]*TaskRecord, error)
	// Delete removes the record of id, if any.
	Delete(ctx context.Context, id string) error
}

// A MemoryTaskStore is a [TaskStore] in the memory of the process, the
// default. A finished task costs its record and its result's JSON.
type MemoryTaskStore struct {
	mu      sync.Mutex
	records map[string]*TaskRecord
}

// NewMemoryTaskStore returns an empty MemoryTaskStore.
func NewMemoryTaskStore() *MemoryTaskStore {
	return &MemoryTaskStore{records: map[string]*TaskRecord{}}
}

// Save implements TaskStore.
func (s *MemoryTaskStore) Save(_ context.Context, r *TaskRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[r.ID] = r
	return nil
}

// Load implements TaskStore.
func (s *MemoryTaskStore) Load(_ context.Context, id string) (*TaskRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[id]; ok {
		return r, nil
	}
	return nil, ErrTaskNotFound
}

// List implements TaskStore.
func (s *MemoryTaskStore) List(_ context.Context, owner string) ([]*TaskRecord, error) {
	s.mu.Lock()
	var out []*TaskRecord
	for _, r := range s.records {
		if r.Owner == owner {
			out = append(out, r)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *TaskRecord) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Delete implements TaskStore.
func (s *MemoryTaskStore) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, id)
	return nil
}

// Len returns the number of tasks the store holds.
func (s *MemoryTaskStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}
