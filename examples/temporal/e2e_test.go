package agentflow_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	agentflow "github.com/clinvoke/clinvoke/examples/temporal"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

const (
	// envWorker, set to "ADDRESS NAMESPACE IDENTITY", makes the test binary
	// a worker of the end-to-end test (see TestMain).
	envWorker = "CLINVOKE_TEMPORAL_WORKER"
	// envTurn tags every process of one turn, so that the test can tell
	// whether any is left.
	envTurn = "CLINVOKE_TEMPORAL_TURN"
	// devServerBin is the name of the dev server built from ./devserver, as
	// CI installs it (.ci/run); TEMPORAL_DEVSERVER may give its path.
	devServerBin = "clinvoke-temporal-devserver"
)

// workerMain runs a worker for the end-to-end test in a process of its own:
// the test kills one outright. Its agents are the test binary again, each
// turn's script in the turn's Env.
func workerMain(spec string) int {
	os.Unsetenv(envWorker) // the agents it starts are agents, not workers
	f := strings.Fields(spec)
	if len(f) != 3 {
		fmt.Fprintf(os.Stderr, "worker: %s=%q: want ADDRESS NAMESPACE IDENTITY\n", envWorker, spec)
		return 2
	}
	c, err := client.Dial(client.Options{HostPort: f[0], Namespace: f[1], Identity: f[2], Logger: quietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	defer c.Close()
	a := &agentflow.Activities{
		Invokers: map[string]invoker.Invoker{
			"claude": claude.New(invokertest.Agent{CLI: "claude"}.Options()),
			"codex":  codex.New(invokertest.Agent{CLI: "codex"}.Options()),
			"gemini": gemini.New(invokertest.Agent{CLI: "gemini"}.Options()),
		},
		HeartbeatEvery: 200 * time.Millisecond,
		Worker:         f[2],
	}
	w := agentflow.NewWorker(c, agentflow.TaskQueue, a)
	if err := w.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	w.Stop()
	return 0
}

func quietLogger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// devServer starts the dev server and returns its address and namespace.
// Without it the test skips, except in CI, where it fails: CI builds it.
func devServer(tb testing.TB) (addr, namespace string) {
	tb.Helper()
	bin := os.Getenv("TEMPORAL_DEVSERVER")
	if bin == "" {
		p, err := exec.LookPath(devServerBin)
		if err != nil {
			msg := fmt.Sprintf("no Temporal dev server: build it with `cd examples/temporal/devserver && go build -o $(go env GOPATH)/bin/%s .` or set TEMPORAL_DEVSERVER to its path", devServerBin)
			if os.Getenv("CI") == "true" {
				tb.Fatal(msg)
			}
			tb.Skip(msg)
		}
		bin = p
	}
	cmd := exec.Command(bin)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(tb, err)
	require.NoError(tb, cmd.Start())
	stopProcess(tb, cmd, "dev server")
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(tb, err, "the dev server's address")
	f := strings.Fields(line)
	require.Len(tb, f, 2, "the dev server printed %q", line)
	return f[0], f[1]
}

// stopProcess ends cmd with SIGTERM when the test ends (SIGKILL after 20 s)
// and waits for it.
func stopProcess(tb testing.TB, cmd *exec.Cmd, what string) {
	tb.Cleanup(func() {
		if cmd.ProcessState != nil {
			return
		}
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(testenv.Timeout(20 * time.Second)):
			tb.Errorf("%s (pid %d) did not stop on SIGTERM: killed", what, cmd.Process.Pid)
			cmd.Process.Kill()
			<-done
		}
	})
}

type workerProc struct {
	identity string
	cmd      *exec.Cmd
	waited   chan struct{}
}

// startWorker starts the test binary as a worker and waits until it polls.
func startWorker(t *testing.T, addr, ns, identity string) *workerProc {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorker+"="+addr+" "+ns+" "+identity)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	w := &workerProc{identity: identity, cmd: cmd, waited: make(chan struct{})}
	stopProcess(t, cmd, identity)
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "worker %s did not start", identity)
	require.Equal(t, "ready\n", line)
	return w
}

// procsWithEnv returns the pids of the processes whose environment holds
// entry.
func procsWithEnv(entry string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if slices.ContainsFunc(bytes.Split(b, []byte{0}), func(kv []byte) bool { return string(kv) == entry }) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cgroupsOf returns the clinvoke cgroups (homes and their runs) of the host
// processes pids, anywhere under the cgroup v2 mount.
func cgroupsOf(pids ...int) []string {
	var root string
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) > 2 && f[2] == "cgroup2" {
				root = f[1]
				break
			}
		}
	}
	if root == "" {
		return nil
	}
	var found []string
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		var ns, pid int
		var start uint64
		if n, _ := fmt.Sscanf(d.Name(), "clinvoke-%d-%d-%d", &ns, &pid, &start); n == 3 {
			if slices.Contains(pids, pid) {
				found = append(found, path)
			}
			return filepath.SkipDir
		}
		return nil
	})
	return found
}

// keepersOf returns the pids of the cgroup keepers of the host processes
// pids: processes whose command line names one of their homes.
func keepersOf(pids ...int) []int {
	var found []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.HasPrefix(b, []byte("clinvoke-keeper")) {
			continue
		}
		for _, arg := range bytes.Split(b, []byte{0}) {
			var ns, host int
			var start uint64
			if n, _ := fmt.Sscanf(filepath.Base(string(arg)), "clinvoke-%d-%d-%d", &ns, &host, &start); n == 3 && slices.Contains(pids, host) {
				found = append(found, pid)
			}
		}
	}
	return found
}

// turnScript is the Env of a turn that the fake agent plays as a, tagged.
func turnScript(a invokertest.Agent, tag string) []string {
	return append(a.Options().Env, envTurn+"="+tag)
}

// TestTemporalEndToEnd runs FanOut on a real Temporal dev server with two
// worker processes on 127.0.0.1 and the fake agent: 20 turns of which 5 are
// cancelled mid-run, then a turn whose worker is SIGKILLed mid-turn. Nothing
// survives: no agent process, no cgroup, no goroutine.
func TestTemporalEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	noLeaks(t)
	addr, ns := devServer(t)
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: ns, Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	var workerPids []int
	t.Cleanup(func() {
		// Registered before the workers start, runs after they stopped. Each
		// worker's keeper removes its cgroups once the worker has exited:
		// give it a moment.
		deadline := time.Now().Add(5 * time.Second)
		for len(cgroupsOf(workerPids...))+len(keepersOf(workerPids...)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if left := cgroupsOf(workerPids...); len(left) > 0 {
			t.Errorf("cgroups left behind: %v", left)
		}
		if left := keepersOf(workerPids...); len(left) > 0 {
			t.Errorf("keeper processes left behind: %v", left)
		}
	})
	workers := []*workerProc{
		startWorker(t, addr, ns, "worker-a"),
		startWorker(t, addr, ns, "worker-b"),
	}
	for _, w := range workers {
		workerPids = append(workerPids, w.cmd.Process.Pid)
	}
	run := fmt.Sprintf("e2e-%d", time.Now().UnixNano())
	allTag := envTurn + "=" + run

	t.Run("20 turns, 5 cancelled", func(t *testing.T) {
		cancel := []int{1, 5, 9, 13, 17}
		clis := []string{"claude", "codex", "gemini"}
		in := agentflow.FanOutInput{Concurrency: 8, HeartbeatTimeout: 10 * time.Second}
		dir := t.TempDir()
		for i := range 20 {
			a := invokertest.Agent{CLI: clis[i%3], Answer: fmt.Sprintf("answer %d", i), Progress: 500 * time.Millisecond}
			if slices.Contains(cancel, i) {
				// Part of the answer, then a model that never finishes.
				// It leaves a child in its group and a setsid daemon behind.
				a = invokertest.Agent{CLI: clis[i%3], Answer: fmt.Sprintf("partial answer of turn %d", i), Chunks: 3, Stall: time.Hour, LeaveBehind: true}
			}
			in.Turns = append(in.Turns, agentflow.TurnInput{
				CLI: clis[i%3], Prompt: fmt.Sprintf("turn %d", i), Workdir: dir,
				Env: append(turnScript(a, run), envTurn+"_"+fmt.Sprint(i)+"="+run),
			})
		}
		ctx, stop := context.WithTimeout(context.Background(), testenv.Timeout(3*time.Minute))
		defer stop()
		wf, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: run + "-fanout", TaskQueue: agentflow.TaskQueue}, agentflow.FanOutWorkflow, in)
		require.NoError(t, err)

		// Cancel each of the five once it is streaming, as its heartbeat
		// shows; check that its tree is gone as soon as it reports cancelled.
		signalled := map[int]time.Time{}
		checked := map[int]bool{}
		for len(checked) < len(cancel) {
			require.NoError(t, ctx.Err(), "the cancels did not all complete")
			desc, err := c.DescribeWorkflowExecution(ctx, wf.GetID(), wf.GetRunID())
			require.NoError(t, err)
			for _, pa := range desc.GetPendingActivities() {
				var i int
				if _, err := fmt.Sscanf(pa.GetActivityId(), "turn-%d", &i); err != nil || !slices.Contains(cancel, i) {
					continue
				}
				if _, ok := signalled[i]; ok || pa.GetHeartbeatDetails() == nil {
					continue
				}
				var p agentflow.Progress
				if converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &p) != nil || p.Partial == "" {
					continue
				}
				signalled[i] = time.Now()
				require.NoError(t, c.SignalWorkflow(ctx, wf.GetID(), wf.GetRunID(), agentflow.CancelTurnSignal, i))
			}
			v, err := c.QueryWorkflow(ctx, wf.GetID(), wf.GetRunID(), agentflow.StatusQuery)
			require.NoError(t, err)
			var status []agentflow.TurnResult
			require.NoError(t, v.Get(&status))
			for _, i := range cancel {
				if status[i].State == agentflow.StateCancelled && !checked[i] {
					checked[i] = true
					assert.Empty(t, procsWithEnv(envTurn+"_"+fmt.Sprint(i)+"="+run), "turn %d reported cancelled with processes alive", i)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}

		var out agentflow.FanOutOutput
		require.NoError(t, wf.Get(ctx, &out))
		var worst time.Duration
		ran := map[string]int{}
		for i, r := range out.Results {
			if !slices.Contains(cancel, i) {
				if assert.Equal(t, agentflow.StateDone, r.State, "turn %d: %+v", i, r) {
					assert.Equal(t, fmt.Sprintf("answer %d", i), r.Output.Text)
					ran[r.Output.Worker]++
				}
				continue
			}
			require.Equal(t, agentflow.StateCancelled, r.State, "turn %d: %+v", i, r)
			require.NotNil(t, r.Progress, "turn %d: cancel details", i)
			assert.NotEmpty(t, r.Progress.SessionID, "turn %d", i)
			assert.NotEmpty(t, r.Progress.Partial, "turn %d", i)
			assert.Contains(t, fmt.Sprintf("partial answer of turn %d", i), r.Progress.Partial)
			d := r.Progress.GoneAt.Sub(signalled[i])
			t.Logf("turn %d (%s on %s): cancel signalled → tree gone in %v", i, in.Turns[i].CLI, r.Progress.Worker, d.Round(time.Millisecond))
			worst = max(worst, d)
		}
		t.Logf("worst cancel → tree gone: %v; turns completed per worker: %v", worst.Round(time.Millisecond), ran)
		// The cancel travels in the response to a heartbeat: one throttle
		// interval (1 s, WorkerOptions) plus the ticker (200 ms), then the
		// ladder's first step (SIGINT; the fake exits at once).
		assert.Less(t, worst, 3*time.Second, "a cancel reaches a gone tree within the bound")
		assert.Empty(t, procsWithEnv(allTag))
	})

	t.Run("workflow cancelled", func(t *testing.T) {
		tag := run + "-wfcancel"
		in := agentflow.FanOutInput{Concurrency: 4, HeartbeatTimeout: 10 * time.Second}
		for i, cli := range []string{"claude", "codex", "gemini", "claude", "codex", "gemini"} {
			a := invokertest.Agent{CLI: cli, Answer: fmt.Sprintf("partial %d", i), Chunks: 3, Stall: time.Hour, LeaveBehind: true}
			in.Turns = append(in.Turns, agentflow.TurnInput{CLI: cli, Prompt: "p", Workdir: t.TempDir(), Env: turnScript(a, tag)})
		}
		ctx, stop := context.WithTimeout(context.Background(), testenv.Timeout(2*time.Minute))
		defer stop()
		wf, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: tag, TaskQueue: agentflow.TaskQueue}, agentflow.FanOutWorkflow, in)
		require.NoError(t, err)
		// Wait until the first four stream (the other two wait for a slot).
		for {
			require.NoError(t, ctx.Err(), "the turns never all streamed")
			desc, err := c.DescribeWorkflowExecution(ctx, wf.GetID(), wf.GetRunID())
			require.NoError(t, err)
			streaming := 0
			for _, pa := range desc.GetPendingActivities() {
				var p agentflow.Progress
				if pa.GetHeartbeatDetails() != nil && converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &p) == nil && p.Partial != "" {
					streaming++
				}
			}
			if streaming == 4 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		cancelled := time.Now()
		require.NoError(t, c.CancelWorkflow(ctx, wf.GetID(), wf.GetRunID()))
		var out agentflow.FanOutOutput
		err = wf.Get(ctx, &out)
		took := time.Since(cancelled)
		var ce *temporal.CanceledError
		require.ErrorAs(t, err, &ce, "the workflow ends cancelled")
		assert.Empty(t, procsWithEnv(envTurn+"="+tag), "no process of any turn once the workflow is cancelled")
		t.Logf("workflow cancelled with 4 turns streaming: all trees gone and the workflow closed %v after the cancel", took.Round(time.Millisecond))

		v, err := c.QueryWorkflow(ctx, wf.GetID(), wf.GetRunID(), agentflow.StatusQuery)
		require.NoError(t, err)
		var status []agentflow.TurnResult
		require.NoError(t, v.Get(&status))
		for i, r := range status {
			if i < 4 {
				require.Equal(t, agentflow.StateCancelled, r.State, "turn %d: %+v", i, r)
				require.NotNil(t, r.Progress, "turn %d", i)
				assert.NotEmpty(t, r.Progress.SessionID, "turn %d", i)
				assert.Contains(t, fmt.Sprintf("partial %d", i), r.Progress.Partial, "turn %d", i)
				assert.False(t, r.Progress.GoneAt.Before(cancelled), "turn %d", i)
			} else {
				assert.Equal(t, agentflow.StateSkipped, r.State, "turn %d never started", i)
			}
		}
	})

	t.Run("worker killed mid-turn", func(t *testing.T) {
		if level := claude.New().Capabilities().Containment; level != "cgroup" {
			// At the tracking level a host killed outright takes down
			// the CLI only (package invoker, Containment).
			msg := fmt.Sprintf("the keeper needs cgroup containment; this machine gives %q", level)
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		tag := run + "-crash"
		a := invokertest.Agent{CLI: "claude", Answer: "done after the crash", Progress: 4 * time.Second, LeaveBehind: true}
		ctx, stop := context.WithTimeout(context.Background(), testenv.Timeout(2*time.Minute))
		defer stop()
		wf, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: run + "-crash", TaskQueue: agentflow.TaskQueue}, agentflow.FanOutWorkflow,
			agentflow.FanOutInput{
				HeartbeatTimeout: 3 * time.Second, RetryInterval: 100 * time.Millisecond,
				Turns: []agentflow.TurnInput{{CLI: "claude", Prompt: "survive a crash", Workdir: t.TempDir(), Env: turnScript(a, tag)}},
			})
		require.NoError(t, err)

		// Wait for the turn to run and report its session.
		var first agentflow.Progress
		for first.SessionID == "" || first.Worker == "" {
			require.NoError(t, ctx.Err(), "the turn never reported its session")
			desc, err := c.DescribeWorkflowExecution(ctx, wf.GetID(), wf.GetRunID())
			require.NoError(t, err)
			for _, pa := range desc.GetPendingActivities() {
				if pa.GetHeartbeatDetails() != nil {
					converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &first)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		agents := procsWithEnv(envTurn + "=" + tag)
		require.NotEmpty(t, agents, "the turn's agent runs")
		i := slices.IndexFunc(workers, func(w *workerProc) bool { return w.identity == first.Worker })
		require.GreaterOrEqual(t, i, 0, "worker %q", first.Worker)
		victim, other := workers[i], workers[1-i]

		killed := time.Now()
		require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
		victim.cmd.Wait()
		for len(procsWithEnv(envTurn+"="+tag)) > 0 && time.Since(killed) < 5*time.Second {
			time.Sleep(5 * time.Millisecond)
		}
		gone := time.Since(killed)
		t.Logf("%s SIGKILLed mid-turn (session %s): its agent tree (%d processes) gone in %v", victim.identity, first.SessionID, len(agents), gone.Round(time.Millisecond))
		assert.Less(t, gone, time.Second, "the keeper kills the dead worker's trees within a second")
		victimPid := victim.cmd.Process.Pid
		for len(cgroupsOf(victimPid))+len(keepersOf(victimPid)) > 0 && time.Since(killed) < 5*time.Second {
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("its cgroups removed and its keeper exited %v after the kill", time.Since(killed).Round(time.Millisecond))
		assert.Empty(t, cgroupsOf(victimPid), "the dead worker's cgroups")
		assert.Empty(t, keepersOf(victimPid), "the dead worker's keeper")

		// Watch the retry: when the server times the attempt out and
		// schedules the next, when a worker starts it, and when it ends.
		var scheduled, started, ended time.Duration
		for ended == 0 && time.Since(killed) < testenv.Timeout(time.Minute) {
			desc, err := c.DescribeWorkflowExecution(ctx, wf.GetID(), wf.GetRunID())
			require.NoError(t, err)
			pas := desc.GetPendingActivities()
			switch {
			case len(pas) == 0:
				ended = time.Since(killed)
			case pas[0].GetAttempt() >= 2:
				if scheduled == 0 {
					scheduled = time.Since(killed)
				}
				if started == 0 && pas[0].GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
					started = time.Since(killed)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("after the kill: attempt 2 scheduled (heartbeat timed out) at %v, started at %v, completed at %v",
			scheduled.Round(time.Millisecond), started.Round(time.Millisecond), ended.Round(time.Millisecond))

		var out agentflow.FanOutOutput
		require.NoError(t, wf.Get(ctx, &out))
		completed := time.Since(killed)
		r := out.Results[0]
		require.Equal(t, agentflow.StateDone, r.State, "%+v", r)
		// The workflow closes about 5 s after the turn ends: its next task
		// goes first to the sticky queue of the worker that ran it last, the
		// dead one, until worker.Options.StickyScheduleToStartTimeout (5 s).
		t.Logf("the turn completed on %s, attempt %d, resumed=%v; the workflow closed %v after the kill",
			r.Output.Worker, r.Output.Attempt, r.Output.Resumed, completed.Round(time.Millisecond))
		assert.Equal(t, other.identity, r.Output.Worker)
		assert.Equal(t, int32(2), r.Output.Attempt)
		assert.True(t, r.Output.Resumed, "the retry resumed the session")
		assert.Equal(t, first.SessionID, r.Output.SessionID, "the same conversation")
		assert.Equal(t, "done after the crash", r.Output.Text)
		assert.Equal(t, "cgroup", r.Output.Containment)
		assert.Empty(t, procsWithEnv(envTurn+"="+tag))
	})
}
