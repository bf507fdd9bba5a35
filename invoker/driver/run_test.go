package driver

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// catBackend names cat, which echoes its input: all a run's tests need of
// a Backend.
type catBackend struct{ Backend }

func (catBackend) Name() string        { return "cat" }
func (catBackend) Binary() string      { return "cat" }
func (catBackend) InstallHint() string { return "apt-get install coreutils" }

// recorder is a conversation that records what its run hands it.
type recorder struct {
	input    string
	keepOpen bool   // leave standard input open until the CLI exits
	fatal    string // the line that is fatal

	first     chan struct{} // closed at the first line
	firstOnce sync.Once

	mu     sync.Mutex
	lines  []string
	endedN int
	exit   exit // the run's end, as ended found it
	closed bool // the run was over before ended returned
	r      *run
}

func (c *recorder) writeInput(w *os.File, exited <-chan struct{}) {
	io.WriteString(w, c.input)
	if c.keepOpen {
		<-exited
	}
	w.Close()
}

func (c *recorder) stdoutLine(line []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, string(line))
	c.firstOnce.Do(func() { close(c.first) })
	if string(line) == c.fatal {
		return errors.New("fatal line")
	}
	return nil
}

func (c *recorder) lineSkipped(int64)            {}
func (c *recorder) stderrLine(line []byte) error { return nil }

func (c *recorder) ended() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endedN++
	c.exit = *c.r.end()
	select {
	case <-c.r.over():
		c.closed = true
	default:
	}
}

// startCat starts a run of cat for c.
func startCat(t *testing.T, c *recorder) *run {
	t.Helper()
	e := &engine{b: catBackend{}, cfg: newConfig([]invoker.Options{{Binary: "cat", InterruptGrace: 100 * time.Millisecond, TerminateGrace: 100 * time.Millisecond}})}
	r := e.newRun(runSpec{conv: c, cb: newCallbacks(), cmd: &Command{}, workdir: t.TempDir(), input: true})
	c.r, c.first = r, make(chan struct{})
	if err := e.start(context.Background(), r); err != nil {
		t.Fatalf("start() = %v", err)
	}
	return r
}

// The seam between a run and its conversation: the run hands over each
// line in order, stops on a fatal one without handing over more, stops
// when asked, and calls ended once, with its end set, before it is over.
func TestRunConversation(t *testing.T) {
	errStop := errors.New("asked to stop")
	tests := []struct {
		name      string
		conv      *recorder
		stop      bool // stop the run once its first line came
		wantLines []string
		wantStop  error // nil: the CLI exited by itself
	}{
		{name: "lines in order", conv: &recorder{input: "one\n\ntwo\n"}, wantLines: []string{"one", "two"}},
		{name: "a fatal line", conv: &recorder{input: "one\nbad\nthree\n", keepOpen: true, fatal: "bad"}, wantLines: []string{"one", "bad"}, wantStop: errors.New("fatal line")},
		{name: "a stop", conv: &recorder{input: "one\n", keepOpen: true}, stop: true, wantLines: []string{"one"}, wantStop: errStop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.conv
			r := startCat(t, c)
			if tt.stop {
				<-c.first
				r.stop(errStop, r.cfg.graces())
			}
			select {
			case <-r.over():
			case <-time.After(time.Minute):
				t.Fatal("the run is not over a minute on")
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if !slices.Equal(c.lines, tt.wantLines) {
				t.Errorf("lines handed over = %q, want %q", c.lines, tt.wantLines)
			}
			if c.endedN != 1 || c.closed {
				t.Errorf("ended called %d times (before the run was over: %v), want once, before", c.endedN, !c.closed)
			}
			switch got := c.exit.stopErr; {
			case tt.wantStop == nil && got != nil,
				tt.wantStop != nil && (got == nil || got.Error() != tt.wantStop.Error()):
				t.Errorf("the run's stop = %v, want %v", got, tt.wantStop)
			}
			if tt.wantStop == nil && c.exit.state.Code != 0 {
				t.Errorf("cat's exit status = %d, want 0", c.exit.state.Code)
			}
			if !r.stopping() && tt.wantStop != nil {
				t.Error("stopping() = false after a stop")
			}
		})
	}
}
