package driver

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/jsonl"
	"github.com/clinvoke/clinvoke/internal/pipe"
	"github.com/clinvoke/clinvoke/invoker"
)

// newTestRun returns a run with just what awaitReaders and watchedFile
// need, and the given wait delay.
func newTestRun(delay time.Duration) *run {
	cfg := newConfig([]invoker.Options{{WaitDelay: delay}})
	return &run{cfg: &cfg, start: time.Now(), log: slog.New(slog.DiscardHandler)}
}

// newDrainRun returns a test run reading stdout, with a stderr that has
// reached its end.
func newDrainRun(t *testing.T, delay time.Duration, stdout *os.File) *run {
	t.Helper()
	r := newTestRun(delay)
	r.stdoutW = &watchedFile{f: stdout, r: r}
	er, ew, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ew.Close()
	r.stderrW = &watchedFile{f: er, r: r}
	t.Cleanup(func() { er.Close() })
	return r
}

// drain reads w to its end, as the engine's readers do, and reports the
// bytes read on the returned channel.
func drain(w *watchedFile, sink io.Writer) <-chan int64 {
	done := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(sink, w)
		done <- n
	}()
	return done
}

// A stream held open by a process the sweep could not find: after the wait
// delay our end is closed and the wait ends, for a pipe and for a PTY
// master alike (a blocking master could not be interrupted by Close).
func TestAwaitReadersHeldOpen(t *testing.T) {
	tests := []struct {
		name string
		open func(t *testing.T) (ours, theirs *os.File)
		pty  bool
	}{
		{"pipe", func(t *testing.T) (*os.File, *os.File) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			return r, w
		}, false},
		{"pty", func(t *testing.T) (*os.File, *os.File) {
			if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
				t.Skip("PTY mode needs a Unix terminal")
			}
			master, tty, err := pipe.OpenPTY()
			if err != nil {
				t.Fatal(err)
			}
			return master, tty
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ours, theirs := tt.open(t)
			defer theirs.Close() // the holder outlives the wait
			r := newTestRun(50 * time.Millisecond)
			r.stdoutW = &watchedFile{f: ours, r: r, pty: tt.pty}
			er, ew, _ := os.Pipe()
			ew.Close()
			r.stderrW = &watchedFile{f: er, r: r}
			theirs.Write([]byte("left in the buffer\n"))
			var got bytes.Buffer
			outDone, errDone := drain(r.stdoutW, &got), drain(r.stderrW, io.Discard)
			outC, errC := make(chan struct{}), make(chan struct{})
			go func() { <-outDone; close(outC) }()
			go func() { <-errDone; close(errC) }()
			r.awaitReaders(outC, errC) // returns only once both readers ended
			if !bytes.Contains(got.Bytes(), []byte("left in the buffer")) {
				t.Errorf("read %q, want the bytes written before the wait", got.String())
			}
			er.Close()
		})
	}
}

// A writer outside the tree that keeps writing cannot hold Invoke: the
// wait delay is counted once from the sweep, not restarted by each write
// (an escapee printing a line every few milliseconds kept the old wait
// going for hours). What the pipe held at the delay is still delivered.
func TestLiveWriterCutOffAtWaitDelay(t *testing.T) {
	for _, tt := range []struct {
		name  string
		pause time.Duration
	}{
		{"flood", 0},
		{"a line every 10ms", 10 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pw.Close()
			r := newTestRun(50 * time.Millisecond)
			r.stdoutW = &watchedFile{f: pr, r: r}
			er, ew, _ := os.Pipe()
			ew.Close()
			r.stderrW = &watchedFile{f: er, r: r}
			pw.Write([]byte("before the sweep\n"))
			stop := make(chan struct{})
			writerDone := make(chan struct{})
			go func() {
				defer close(writerDone)
				for {
					select {
					case <-stop:
						return
					case <-time.After(tt.pause):
					}
					if _, err := pw.Write([]byte("tick\n")); err != nil {
						return // our end was closed
					}
				}
			}()
			var got bytes.Buffer
			outDone, errDone := drain(r.stdoutW, &got), drain(r.stderrW, io.Discard)
			outC, errC := make(chan struct{}), make(chan struct{})
			go func() { <-outDone; close(outC) }()
			go func() { <-errDone; close(errC) }()
			returned := make(chan bool, 1)
			go func() { returned <- r.awaitReaders(outC, errC) }()
			select {
			case cut := <-returned:
				if !cut {
					t.Error("awaitReaders() = false, want true: a stream was closed at the wait delay")
				}
			case <-time.After(time.Minute):
				t.Fatal("awaitReaders did not return a minute after the sweep while a writer kept writing")
			}
			close(stop)
			<-writerDone
			if !bytes.HasPrefix(got.Bytes(), []byte("before the sweep\n")) {
				t.Errorf("read %.40q..., want what was written before the sweep first", got.String())
			}
			er.Close()
		})
	}
}

// A CLI may enlarge its stdout pipe (F_SETPIPE_SZ) and leave far more than
// the default 64 KiB or 1 MiB in it when it dies: all of it is delivered,
// however slowly the reader consumes it, since no writer is left.
func TestLargePipeKeepsAllOutput(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("F_SETPIPE_SZ is Linux")
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// As large as an unprivileged process may make it (fs.pipe-max-size).
	want := 1 << 20
	if b, err := os.ReadFile("/proc/sys/fs/pipe-max-size"); err == nil {
		fmt.Sscan(string(b), &want)
	}
	size, err := pipe.SetSize(pw, min(want, 32<<20))
	if err != nil {
		t.Fatalf("F_SETPIPE_SZ %d: %v", want, err)
	}
	line := bytes.Repeat([]byte("x"), 1023)
	line = append(line, '\n')
	lines := size / len(line)
	for range lines {
		pw.Write(line)
	}
	pw.Close() // the CLI is dead; everything is in the pipe
	r := newDrainRun(t, time.Millisecond, pr)
	got := 0
	outC, errC := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(outC)
		rd := jsonl.NewReader(r.stdoutW, 1<<20)
		for {
			if _, err := rd.ReadLine(); err != nil {
				return
			}
			if got++; got%1000 == 0 {
				time.Sleep(5 * time.Millisecond) // a slow consumer, far past the wait delay
			}
		}
	}()
	go func() { io.Copy(io.Discard, r.stderrW); close(errC) }()
	r.awaitReaders(outC, errC)
	if got != lines {
		t.Errorf("read %d lines, want all %d (%d bytes in the pipe)", got, lines, size)
	}
	pr.Close()
}

// With a zero wait delay, what dead writers left in the pipe is still all
// delivered to a slow reader: only a reader waiting on an empty pipe held
// open by an outsider is cut off.
func TestZeroWaitDelayKeepsBufferedOutput(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	const lines = 300
	for range lines {
		pw.Write([]byte(`{"type":"line"}` + "\n"))
	}
	holder := pw // an outsider keeps the pipe open: no end of file
	defer holder.Close()
	r := newDrainRun(t, 0, pr)
	got := 0
	outC, errC := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(outC)
		rd := jsonl.NewReader(r.stdoutW, 1<<20)
		for {
			if _, err := rd.ReadLine(); err != nil {
				return
			}
			got++
			time.Sleep(100 * time.Microsecond) // a slow consumer
		}
	}()
	go func() { io.Copy(io.Discard, r.stderrW); close(errC) }()
	if !r.awaitReaders(outC, errC) {
		t.Error("awaitReaders() = false, want true: the held stream was closed")
	}
	if got != lines {
		t.Errorf("read %d lines, want all %d", got, lines)
	}
	pr.Close()
}

// A terminal reports its end as EIO; the last line without a newline must
// still be read.
func TestPTYLastLineWithoutNewline(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("EIO at the end of a PTY is Linux behaviour")
	}
	master, tty, err := pipe.OpenPTY()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	tty.Write([]byte("a\nDONE"))
	tty.Close()
	r := newTestRun(time.Second)
	rd := jsonl.NewReader(&watchedFile{f: master, r: r, pty: true}, 1<<20)
	var lines []string
	for {
		l, err := rd.ReadLine()
		if err != nil {
			if err != io.EOF {
				t.Errorf("ReadLine() error = %v, want io.EOF", err)
			}
			break
		}
		lines = append(lines, string(l))
	}
	if len(lines) != 2 || lines[1] != "DONE" {
		t.Errorf("lines = %q, want [a DONE]", lines)
	}
}

// The idle clock runs only while the reader waits on the CLI, not while it
// is busy in OnEvent.
func TestQuietOnlyWhileWaiting(t *testing.T) {
	r := newTestRun(time.Second)
	r.stdoutW = &watchedFile{r: r}
	r.start = time.Now().Add(-time.Minute) // last output long ago
	if q := r.quiet(); q != 0 {
		t.Errorf("quiet() = %v while the reader is busy, want 0", q)
	}
	r.stdoutW.blockedSince.Store(int64(time.Since(r.start)-10*time.Second) | 1)
	if q := r.quiet(); q < 10*time.Second || q > 11*time.Second {
		t.Errorf("quiet() = %v, want about 10s (blocked in Read that long)", q)
	}
	// A CLI that closed its stdout and runs on is silent since its last
	// output, although no Read waits on it.
	r.stdoutW.blockedSince.Store(0)
	r.stdoutW.eof.Store(true)
	if q := r.quiet(); q < time.Minute {
		t.Errorf("quiet() = %v after stdout ended, want the time since the last output (a minute)", q)
	}
}
