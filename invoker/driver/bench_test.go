package driver_test

// Benchmarks of the engine. Each one that has a target compares against a
// baseline in the same run or reports a duration the target is stated in;
// none asserts a time (scripts/bench turns the figures into BENCHMARKS.md).
// All of them run the test binary as the fake agent in its Codex flavour,
// and report `survivors`: processes of the benchmark's runs still alive
// after the last Invoke returned (always 0, else the benchmark fails).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// benchInvoker returns an Invoker of the fake agent.
func benchInvoker(opts ...invoker.Options) invoker.Invoker {
	return driver.New(testBackend{}, append([]invoker.Options{invoker.Options{Binary: os.Args[0]}}, opts...)...)
}

// benchRequest returns a request running s, tagged so that reportSurvivors
// finds whatever of its runs is left.
func benchRequest(b *testing.B, s *fakeagent.Script) invoker.Request {
	b.Helper()
	if s.Tag == "" {
		s.Tag = fakeagent.NewTag()
	}
	return invoker.Request{Prompt: "say hello", Workdir: b.TempDir(), Env: s.Env()}
}

// reportSurvivors reports, and fails on, processes carrying tag.
func reportSurvivors(b *testing.B, tag string) {
	b.Helper()
	left := fakeagent.Survivors(tag)
	b.ReportMetric(float64(len(left)), "survivors")
	if len(left) > 0 {
		b.Errorf("processes alive after Invoke returned: %v", left)
	}
}

// ms converts d to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// reportQuantiles reports the mean of samples as unit, and their median and
// 99th percentile as p50-ms and p99-ms.
func reportQuantiles(b *testing.B, samples []time.Duration, unit string) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, d := range samples {
		sum += d
	}
	q := func(p float64) time.Duration {
		i := int(p*float64(len(samples))+0.5) - 1
		return samples[min(max(i, 0), len(samples)-1)]
	}
	b.ReportMetric(ms(sum)/float64(len(samples)), unit)
	b.ReportMetric(ms(q(0.50)), "p50-ms")
	b.ReportMetric(ms(q(0.99)), "p99-ms")
}

// BenchmarkInvokeQuick runs a fake agent that answers at once through
// Invoke. Its baseline is BenchmarkRawExecQuick.
func BenchmarkInvokeQuick(b *testing.B) {
	s := fakeagent.Script{Answer: "quick"}
	req := benchRequest(b, &s)
	inv := benchInvoker()
	var level string
	for b.Loop() {
		res, err := inv.Invoke(context.Background(), req)
		if err != nil || res.Text != "quick" {
			b.Fatalf("Invoke() = %+v, %v; want the answer", res, err)
		}
		level = res.Containment
	}
	b.ReportMetric(map[string]float64{"cgroup": 1, "tracking": 2}[level], "containment") // 1 cgroup, 2 tracking
	reportSurvivors(b, s.Tag)
}

// BenchmarkRawExecQuick runs the fake of BenchmarkInvokeQuick with bare
// os/exec: the same arguments, environment and prompt on stdin, its stdout
// read line by line to the end, stderr to the null device.
func BenchmarkRawExecQuick(b *testing.B) {
	s := fakeagent.Script{Answer: "quick"}
	req := benchRequest(b, &s)
	env := append(os.Environ(), req.Env...)
	for b.Loop() {
		rawExecQuick(b, req, env)
	}
	reportSurvivors(b, s.Tag)
}

// rawExecQuick is one run of BenchmarkRawExecQuick, with env the fake's
// whole environment.
func rawExecQuick(b *testing.B, req invoker.Request, env []string) {
	cmd := exec.Command(os.Args[0], "exec", "--json", "-")
	cmd.Env, cmd.Dir = env, req.Workdir
	cmd.Stdin = strings.NewReader(req.Prompt)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	lines := 0
	for sc.Scan() {
		lines++
	}
	if err := cmd.Wait(); err != nil || lines == 0 {
		b.Fatalf("raw exec: %d lines, %v", lines, err)
	}
}

// cancelRun starts Invoke of req, waits for its first event, cancels it and
// returns how long Invoke took to return after cancel, with its error.
func cancelRun(inv invoker.Invoker, req invoker.Request) (time.Duration, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	var once sync.Once
	req.OnEvent = func(invoker.Event) { once.Do(func() { close(started) }) }
	type ret struct {
		at  time.Time
		err error
	}
	done := make(chan ret, 1)
	go func() {
		_, err := inv.Invoke(ctx, req)
		done <- ret{time.Now(), err}
	}()
	select {
	case <-started:
	case r := <-done:
		return 0, errors.Join(errors.New("Invoke returned before its first event"), r.err)
	}
	t0 := time.Now()
	cancel()
	r := <-done
	return r.at.Sub(t0), r.err
}

// BenchmarkCancelCooperative measures the time from cancel() to Invoke's
// return, the tree reaped, for a CLI that exits on SIGINT (the first step
// of the ladder): cancel-ms (mean), p50-ms and p99-ms over the b.N runs.
func BenchmarkCancelCooperative(b *testing.B) {
	benchCancel(b, fakeagent.Script{StallFor: time.Hour}, invoker.Sandbox{})
}

// benchCancel measures the cancels of runs of s, each under sb: the
// quantiles of how long Invoke took to return after the cancel.
func benchCancel(b *testing.B, s fakeagent.Script, sb invoker.Sandbox) {
	req := benchRequest(b, &s)
	req.Sandbox = sb
	inv := benchInvoker()
	var samples []time.Duration
	for b.Loop() {
		d, err := cancelRun(inv, req)
		if !errors.Is(err, context.Canceled) {
			b.Fatalf("Invoke() error = %v, want context.Canceled", err)
		}
		samples = append(samples, d)
	}
	reportQuantiles(b, samples, "cancel-ms")
	reportSurvivors(b, s.Tag)
}

// BenchmarkRawSignalCooperative is the baseline of BenchmarkCancelCooperative:
// the same fake run the way a wrapper without a tree guarantee runs it,
// with bare os/exec under a context whose cancellation is
// cmd.Process.Signal(os.Interrupt) (exec.CommandContext's Cancel hook),
// stdout read to its end and cmd.Wait() in the calling goroutine. As in
// CancelCooperative, the run happens in a goroutine of its own and
// cancel() is called once the first line arrived; cancel-ms, p50-ms and
// p99-ms are from cancel() to Wait's return. Nothing of the fake's tree is
// looked for.
func BenchmarkRawSignalCooperative(b *testing.B) {
	s := fakeagent.Script{StallFor: time.Hour}
	req := benchRequest(b, &s)
	env := append(os.Environ(), req.Env...)
	var samples []time.Duration
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, os.Args[0], "exec", "--json", "-")
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
		cmd.Env, cmd.Dir = env, req.Workdir
		cmd.Stdin = strings.NewReader(req.Prompt)
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		started := make(chan struct{})
		done := make(chan time.Time, 1)
		go func() {
			if err := cmd.Start(); err != nil {
				close(started)
				done <- time.Now()
				return
			}
			sc := bufio.NewScanner(out)
			for first := true; sc.Scan(); first = false {
				if first {
					close(started)
				}
			}
			cmd.Wait()
			done <- time.Now()
		}()
		<-started
		t0 := time.Now()
		cancel()
		samples = append(samples, (<-done).Sub(t0))
	}
	reportQuantiles(b, samples, "cancel-ms")
	reportSurvivors(b, s.Tag)
}

// BenchmarkCancelStubborn cancels a CLI that ignores SIGINT and SIGTERM,
// so the whole ladder runs up to SIGKILL. overshoot-ms is the time from
// cancel() to Invoke's return minus the two grace periods (mean; p50-ms
// and p99-ms are of the overshoot too).
func BenchmarkCancelStubborn(b *testing.B) {
	const interrupt, terminate = 25 * time.Millisecond, 25 * time.Millisecond
	s := fakeagent.Script{StallFor: time.Hour, IgnoreSignals: true}
	req := benchRequest(b, &s)
	inv := benchInvoker(invoker.Options{InterruptGrace: interrupt, TerminateGrace: terminate})
	var samples []time.Duration
	for b.Loop() {
		d, err := cancelRun(inv, req)
		if !errors.Is(err, context.Canceled) {
			b.Fatalf("Invoke() error = %v, want context.Canceled", err)
		}
		samples = append(samples, d-interrupt-terminate)
	}
	reportQuantiles(b, samples, "overshoot-ms")
	reportSurvivors(b, s.Tag)
}

// BenchmarkPipeHolder runs a CLI that exits after its answer while a
// grandchild keeps its stdout and stderr open. return-ms is the time from
// the CLI's terminal event (printed just before it exits) to Invoke's
// return (mean; also p50-ms and p99-ms).
func BenchmarkPipeHolder(b *testing.B) {
	s := fakeagent.Script{HoldStdout: true}
	req := benchRequest(b, &s)
	inv := benchInvoker()
	var samples []time.Duration
	for b.Loop() {
		var last time.Time
		req.OnEvent = func(ev invoker.Event) {
			if ev.Kind == invoker.KindDone {
				last = time.Now()
			}
		}
		if _, err := inv.Invoke(context.Background(), req); err != nil {
			b.Fatalf("Invoke() error = %v, want nil", err)
		}
		if last.IsZero() {
			b.Fatal("no terminal event")
		}
		samples = append(samples, time.Since(last))
	}
	reportQuantiles(b, samples, "return-ms")
	reportSurvivors(b, s.Tag)
}

// BenchmarkConcurrentCancel1000 starts 1000 runs on one Invoker, waits
// until each has printed its first event, then cancels them all at once.
// all-reaped-ms is the time from cancel() until the last Invoke returned;
// heap-KiB-per-run is the live heap the in-flight runs held (after a GC,
// over the heap before they started), divided by 1000. Run it with
// -benchtime=1x: one iteration starts 1000 processes.
func BenchmarkConcurrentCancel1000(b *testing.B) {
	const n = 1000
	s := fakeagent.Script{StallFor: time.Hour}
	req := benchRequest(b, &s)
	inv := benchInvoker()
	var reaped, heap []float64
	for b.Loop() {
		runtime.GC()
		var before, during runtime.MemStats
		runtime.ReadMemStats(&before)

		ctx, cancel := context.WithCancel(context.Background())
		var started, finished sync.WaitGroup
		started.Add(n)
		errs := make(chan error, n)
		var last time.Time
		var lastMu sync.Mutex
		for range n {
			finished.Add(1)
			go func() {
				defer finished.Done()
				var once sync.Once
				r := req
				r.OnEvent = func(invoker.Event) { once.Do(started.Done) }
				_, err := inv.Invoke(ctx, r)
				now := time.Now()
				once.Do(started.Done) // in case it never printed
				lastMu.Lock()
				if now.After(last) {
					last = now
				}
				lastMu.Unlock()
				if !errors.Is(err, context.Canceled) {
					errs <- err
				}
			}()
		}
		started.Wait()
		runtime.GC()
		runtime.ReadMemStats(&during)
		t0 := time.Now()
		cancel()
		finished.Wait()
		close(errs)
		for err := range errs {
			b.Fatalf("Invoke() error = %v, want context.Canceled", err)
		}
		reaped = append(reaped, ms(last.Sub(t0)))
		heap = append(heap, (float64(during.HeapAlloc)-float64(before.HeapAlloc))/1024/n)
	}
	b.ReportMetric(median(reaped), "all-reaped-ms")
	b.ReportMetric(median(heap), "heap-KiB-per-run")
	reportSurvivors(b, s.Tag)
	// Empty run cgroups are removed just after their runs return.
	left := runCgroups(b)
	for deadline := time.Now().Add(10 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = runCgroups(b) {
		time.Sleep(10 * time.Millisecond)
	}
	b.ReportMetric(float64(len(left)), "cgroups-left")
	if len(left) > 0 {
		b.Errorf("%d run cgroups left 10 s after the runs returned, such as %s", len(left), left[0])
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// BenchmarkHugeLine64MiB runs a CLI that prints one 64 MiB event line.
// peak-extra-MiB is the host's peak resident memory during Invoke over its
// resident memory before (the largest over the b.N runs), from VmHWM after
// resetting it through /proc/self/clear_refs.
func BenchmarkHugeLine64MiB(b *testing.B) {
	const size = 64 << 20
	s := fakeagent.Script{HugeLine: size}
	req := benchRequest(b, &s)
	inv := benchInvoker()
	b.SetBytes(size)
	var peak float64
	for b.Loop() {
		b.StopTimer()
		debug.FreeOSMemory()
		base, ok := residentKiB("VmRSS:")
		if ok {
			ok = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
		}
		b.StartTimer()
		if _, err := inv.Invoke(context.Background(), req); err != nil {
			b.Fatalf("Invoke() error = %v, want nil", err)
		}
		b.StopTimer()
		if hwm, ok2 := residentKiB("VmHWM:"); ok && ok2 {
			peak = max(peak, float64(hwm-base)/1024)
		}
		b.StartTimer()
	}
	b.ReportMetric(peak, "peak-extra-MiB")
	reportSurvivors(b, s.Tag)
}

// residentKiB returns a field of /proc/self/status, in KiB.
func residentKiB(field string) (int64, bool) {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(st) {
		if v, ok := bytes.CutPrefix(line, []byte(field)); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(v)), " kB"), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// runCgroups lists the run cgroups of this process that still exist (none
// when runs are not in cgroups).
func runCgroups(b *testing.B) []string {
	b.Helper()
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var mount string
	for line := range strings.SplitSeq(string(mounts), "\n") {
		if pre, post, ok := strings.Cut(line, " - "); ok && strings.HasPrefix(post, "cgroup2 ") {
			if f := strings.Fields(pre); len(f) > 4 {
				mount = f[4]
				break
			}
		}
	}
	own, _ := os.ReadFile("/proc/self/cgroup")
	for line := range strings.SplitSeq(string(own), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok && mount != "" {
			left, _ := filepath.Glob(filepath.Join(mount, path, "clinvoke-*-"+strconv.Itoa(os.Getpid())+"-*", "r*"))
			return left
		}
	}
	return nil
}
