package driver_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
)

// busyHostIdle are the numbers of idle background processes
// BenchmarkBusyHost runs beside the runs.
var busyHostIdle = []int{0, 3000}

// BenchmarkBusyHost measures what a run costs on a host that runs many
// unrelated processes: for each N in busyHostIdle it starts N idle
// processes (once, for all its sub-benchmarks), then, at the cgroup and at
// the tracking level, runs in every iteration the quick fake through bare
// os/exec and through Invoke, back to back (alternating which goes first),
// and a cooperative cancel (as BenchmarkCancelCooperative). It reports
// invoke-ms and raw-ms (medians), overhead-x (their ratio) and the
// cancel's p50-ms and p99-ms. A level the host cannot give is skipped.
//
// Sub-benchmarks are named bg=N/LEVEL, so that scripts/bench can run one N
// at a time (the idle processes are started only for the N selected).
func BenchmarkBusyHost(b *testing.B) {
	for _, n := range busyHostIdle {
		b.Run("bg="+strconv.Itoa(n), func(b *testing.B) {
			startIdle(b, n)
			for _, lvl := range []string{"cgroup", "tracking"} {
				b.Run(lvl+"/quick", func(b *testing.B) { busyHostQuick(b, lvl) })
				b.Run(lvl+"/cancel", func(b *testing.B) { busyHostCancel(b, lvl) })
			}
		})
	}
}

// busyHostQuick runs the quick fake through bare os/exec and through
// Invoke at level lvl, back to back in every iteration (alternating which
// goes first), and reports invoke-ms and raw-ms (medians) and overhead-x,
// their ratio.
func busyHostQuick(b *testing.B, lvl string) {
	skipUnless(b, lvl)
	s := fakeagent.Script{Answer: "quick"}
	req := benchRequest(b, &s)
	env := append(os.Environ(), req.Env...)
	inv := benchInvoker(invoker.Options{Containment: lvl})
	var raw, through []time.Duration
	invoke := func() {
		t0 := time.Now()
		res, err := inv.Invoke(context.Background(), req)
		through = append(through, time.Since(t0))
		if err != nil || res.Text != "quick" || res.Containment != lvl {
			b.Fatalf("Invoke() = %+v, %v; want the answer at %v", res, err, lvl)
		}
	}
	rawRun := func() {
		t0 := time.Now()
		rawExecQuick(b, req, env)
		raw = append(raw, time.Since(t0))
	}
	i := 0
	for b.Loop() {
		if i++; i%2 == 0 {
			rawRun()
			invoke()
		} else {
			invoke()
			rawRun()
		}
	}
	mi, mr := medianDuration(through), medianDuration(raw)
	b.ReportMetric(ms(mi), "invoke-ms")
	b.ReportMetric(ms(mr), "raw-ms")
	if mr > 0 {
		b.ReportMetric(float64(mi)/float64(mr), "overhead-x")
	}
	reportSurvivors(b, s.Tag)
}

// busyHostCancel is BenchmarkCancelCooperative at level lvl.
func busyHostCancel(b *testing.B, lvl string) {
	skipUnless(b, lvl)
	s := fakeagent.Script{StallFor: time.Hour}
	req := benchRequest(b, &s)
	inv := benchInvoker(invoker.Options{Containment: lvl})
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

// skipUnless skips b when the host cannot give level lvl.
func skipUnless(b *testing.B, lvl string) {
	b.Helper()
	if got, err := probe(lvl); got != lvl {
		b.Skipf("containment %v unavailable: got %v, %v", lvl, got, err)
	}
}

// medianDuration returns the median of d (0 if empty); it sorts d.
func medianDuration(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// idleScript runs as sh -c idleScript idle N: it forks N subshells that
// block reading the holder's stdin (no exec: a forked shell is small and
// cheap to make), prints each one's pid, then "ready", and waits for them.
const idleScript = `exec 3<&0
i=0
while [ "$i" -lt "$1" ]; do { read _ <&3; } & echo $!; i=$((i+1)); done
echo ready
wait
`

// startIdle starts n idle processes that are not the host's children (a
// holder shell's), and registers a cleanup that kills each of them by pid
// and proves them all gone: the holder is stopped first, so that no pid is
// reaped (and reused) before it has been signalled; then it is resumed,
// reaps them all and exits; then no process carrying their tag is left.
func startIdle(b *testing.B, n int) {
	if n == 0 {
		return
	}
	tag := fakeagent.NewTag()
	cmd := exec.Command("/bin/sh", "-c", idleScript, "idle", strconv.Itoa(n))
	cmd.Env = append(os.Environ(), fakeagent.EnvTag+"="+tag)
	var stderr bytes.Buffer // fork failures: a process limit reached
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var pids []int
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGSTOP)
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				b.Errorf("kill idle process %d: %v", pid, err)
			}
		}
		cmd.Process.Signal(syscall.SIGCONT)
		stdin.Close()
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		select {
		case err := <-waited:
			if err != nil {
				b.Errorf("idle holder: %v", err)
			}
		case <-time.After(testenv.Timeout(time.Minute)):
			cmd.Process.Kill()
			b.Errorf("the idle holder did not exit: %v", <-waited)
		}
		if left := fakeagent.Survivors(tag); len(left) > 0 {
			b.Errorf("%d idle processes left, such as %d", len(left), left[0])
		}
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
		pid, err := strconv.Atoi(sc.Text())
		if err != nil {
			b.Fatalf("idle holder printed %q", sc.Text())
		}
		pids = append(pids, pid)
	}
	if len(pids) != n {
		b.Fatalf("started %d idle processes, want %d (a process limit? ulimit -u, the cgroup's pids.max): %s", len(pids), n, bytes.TrimSpace(stderr.Bytes()))
	}
}

// BenchmarkCancelSigIgn measures, as BenchmarkCancelCooperative does, the
// time from cancel() to Invoke's return with the default graces (1 s,
// 2 s), for a CLI that handles SIGINT (handled, the baseline), one whose
// process ignores SIGINT (SIG_IGN, as a host started with SIGINT ignored
// passes it on: the ladder sends SIGTERM right after SIGINT) and one that
// ignores both (SIGKILL right after). With the graces not waited, the three are within a
// few milliseconds of each other; waited out, the second would take the
// interrupt grace and the third both graces.
func BenchmarkCancelSigIgn(b *testing.B) {
	for _, c := range []struct {
		name   string
		sigIgn []string
	}{
		{"handled", nil},
		{"SIGINT", []string{"SIGINT"}},
		{"SIGINT+SIGTERM", []string{"SIGINT", "SIGTERM"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchCancel(b, fakeagent.Script{StallFor: time.Hour, SigIgn: c.sigIgn}, invoker.Sandbox{})
		})
	}
}
