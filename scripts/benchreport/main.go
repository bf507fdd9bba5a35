// Command benchreport turns the output of clinvoke's benchmarks (`go test
// -bench`, usually several rounds of it, as scripts/bench runs them) into
// BENCHMARKS.md: a table of each figure with its target and whether it is
// met, the median across rounds, and the machine it ran on.
//
// Usage:
//
//	benchreport [-o BENCHMARKS.md] [-notes notes.md] bench-output.txt...
//	benchreport -docs [-o BENCHMARKS.md] [file.md...]
//
// With -docs it rewrites the figures that README.md, e2e/README.md and docs/*.md (or the
// files named) quote from the raw output stored in BENCHMARKS.md: each
// sits in a region "<!-- figures: NAME -->...<!-- /figures -->" (see
// docs.go). The package's test fails when a region or the table of
// BENCHMARKS.md is not what the stored raw output renders.
//
// The notes file, if given, is copied under a "Notes" heading: what the
// figures cannot say by themselves, such as why a target is missed.
//
// A ratio is computed for each pair of runs (the target and its baseline
// back to back, paired in the order they were printed) and the median of
// those ratios is reported. The sandboxed benchmarks are paired with their
// own baselines by place: each run with the baseline's run printed right
// before or after it (see pairedRatio).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// samples maps benchmark name (without the -GOMAXPROCS suffix) → unit →
// one value per run, in the order they were printed. The pseudo-unit
// seqUnit holds each run's place among all the result lines parsed.
type samples map[string]map[string][]float64

// seqUnit is the pseudo-unit under which parse records each run's place in
// the output (0 for the first result line, across every input parsed into
// the same samples); no benchmark reports a unit starting with '#'.
const seqUnit = "#seq"

// runs returns the number of result lines parsed into s so far.
func (s samples) runs() int {
	n := 0
	for _, units := range s {
		n += len(units[seqUnit])
	}
	return n
}

var suffix = regexp.MustCompile(`-\d+$`)

// parse reads `go test -bench` output, keeping benchmark result lines and
// the cpu: header.
func parse(r io.Reader, s samples, cpu *string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "cpu: "); ok {
			*cpu = strings.TrimSpace(v)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // not a result line (e.g. a log line)
		}
		name := suffix.ReplaceAllString(f[0], "")
		seq := float64(s.runs())
		if s[name] == nil {
			s[name] = map[string][]float64{}
		}
		s[name][seqUnit] = append(s[name][seqUnit], seq)
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			s[name][f[i+1]] = append(s[name][f[i+1]], v)
		}
	}
	return sc.Err()
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// A row is one line of the table.
type row struct {
	figure string  // what is measured
	value  float64 // NaN when the benchmark did not run
	unit   string
	target string // "" when there is none
	ok     func(float64) bool
	n      int // number of rounds the value is the median of
	// rounds holds the value of each round (for a ratio, of each pair),
	// when the row has them.
	rounds []float64
}

func (s samples) get(name, unit string) ([]float64, bool) {
	v, ok := s[name][unit]
	return v, ok && len(v) > 0
}

// has reports whether any benchmark whose name starts with prefix ran.
func (s samples) has(prefix string) bool {
	for name := range s {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

func (s samples) med(name, unit string) (float64, int) {
	v, ok := s.get(name, unit)
	if !ok {
		return math.NaN(), 0
	}
	return median(v), len(v)
}

// ratio is the median of per-round ratios of name over base in unit
// (rounds paired in order), or the ratio of the medians when the counts
// differ.
func (s samples) ratio(name, base, unit string) (float64, int) {
	a, ok1 := s.get(name, unit)
	b, ok2 := s.get(base, unit)
	if !ok1 || !ok2 {
		return math.NaN(), 0
	}
	if len(a) != len(b) {
		return median(a) / median(b), min(len(a), len(b))
	}
	r := make([]float64, len(a))
	for i := range a {
		r[i] = a[i] / b[i]
	}
	return median(r), len(r)
}

// pairedRatio pairs each run of name with a run of base printed right
// before it or, failing that, right after it (each run of base in one pair
// at most): the runs scripts/bench makes back to back. It returns the
// ratio of each pair in unit, in the order of name's runs; none when no
// run of name has its baseline beside it.
func (s samples) pairedRatio(name, base, unit string) []float64 {
	a, ok1 := s.get(name, unit)
	b, ok2 := s.get(base, unit)
	aSeq, bSeq := s[name][seqUnit], s[base][seqUnit]
	if !ok1 || !ok2 || len(aSeq) != len(a) || len(bSeq) != len(b) {
		return nil
	}
	at := make(map[float64]int, len(bSeq)) // place → index in b
	for j, q := range bSeq {
		at[q] = j
	}
	used := make([]bool, len(b))
	var r []float64
	for i, q := range aSeq {
		for _, p := range []float64{q - 1, q + 1} {
			if j, ok := at[p]; ok && !used[j] {
				used[j] = true
				r = append(r, a[i]/b[j])
				break
			}
		}
	}
	return r
}

func atMost(t float64) func(float64) bool   { return func(v float64) bool { return v <= t } }
func lessThan(t float64) func(float64) bool { return func(v float64) bool { return v < t } }

func rows(s samples) []row {
	var out []row
	var last []float64 // the rounds of the value last looked up
	med := func(name, unit string) (float64, int) {
		last, _ = s.get(name, unit)
		return s.med(name, unit)
	}
	ratio := func(name, base, unit string) (float64, int) {
		a, _ := s.get(name, unit)
		b, _ := s.get(base, unit)
		last = nil
		if len(a) == len(b) {
			for i := range a {
				last = append(last, a[i]/b[i])
			}
		}
		return s.ratio(name, base, unit)
	}
	// paired is a sandboxed benchmark's ratio to its own baseline, run
	// beside it (pairedRatio); output in which the baseline never ran
	// (older rounds ran the sandboxed benchmarks once, against the plain
	// benchmarks of the round) gives the ratio to old as before, and the
	// figure says which.
	paired := func(figure, name, base, old, unit string) (string, float64, int) {
		short := func(n string) string { return "`" + strings.TrimPrefix(n, "Benchmark") + "`" }
		if _, ok := s.get(base, unit); ok {
			r := s.pairedRatio(name, base, unit)
			last = r
			return fmt.Sprintf(figure, short(name)+" / "+short(base)+" run beside it"), median(r), len(r)
		}
		v, n := ratio(name, old, unit)
		return fmt.Sprintf(figure, short(name)+" / "+short(old)), v, n
	}
	add := func(figure string, v float64, n int, unit, target string, ok func(float64) bool) {
		out = append(out, row{figure: figure, value: v, unit: unit, target: target, ok: ok, n: n, rounds: last})
		last = nil
	}
	info := func(figure, name, unit, shown string) {
		v, n := med(name, unit)
		add(figure, v, n, shown, "", nil)
	}

	v, n := med("BenchmarkInvokeQuick", "containment")
	add("Containment level of the benchmarked runs (`InvokeQuick` containment)", v, n, "level", "", nil)
	v, n = ratio("BenchmarkInvokeQuick", "BenchmarkRawExecQuick", "ns/op")
	add("Invoke ÷ raw os/exec, quick answer (`InvokeQuick` / `RawExecQuick`)", v, n, "×", "≤ 1.10×", atMost(1.10))
	info("  `InvokeQuick` time per run", "BenchmarkInvokeQuick", "ns/op", "ns")
	info("  `RawExecQuick` time per run", "BenchmarkRawExecQuick", "ns/op", "ns")

	v, n = ratio("BenchmarkCancelCooperative", "BenchmarkRawSignalCooperative", "p50-ms")
	add("Cooperative cancel → tree gone ÷ bare signal and wait, median (`CancelCooperative` / `RawSignalCooperative` p50-ms)", v, n, "×", "≤ 1.10×", atMost(1.10))
	v, n = med("BenchmarkCancelCooperative", "p50-ms")
	add("Cooperative cancel → return, median (`CancelCooperative` p50-ms)", v, n, "ms", "≤ 1 ms", atMost(1))
	info("  `RawSignalCooperative` median (p50-ms)", "BenchmarkRawSignalCooperative", "p50-ms", "ms")
	v, n = med("BenchmarkCancelCooperative", "p99-ms")
	add("Cooperative cancel → return, p99 (`CancelCooperative` p99-ms)", v, n, "ms", "≤ 5 ms", atMost(5))
	info("  `CancelCooperative` mean (cancel-ms)", "BenchmarkCancelCooperative", "cancel-ms", "ms")

	f, v, n := paired("Sandboxed ÷ plain Invoke, quick answer (%s)", "BenchmarkInvokeQuickSandboxed", "BenchmarkInvokeQuickPlain", "BenchmarkInvokeQuick", "ns/op")
	add(f, v, n, "×", "≤ 1.10×", atMost(1.10))
	f, v, n = paired("Sandboxed with network rules \"none\" ÷ plain Invoke, quick answer (%s)", "BenchmarkInvokeQuickSandboxedNetwork", "BenchmarkInvokeQuickPlain", "BenchmarkInvokeQuick", "ns/op")
	add(f, v, n, "×", "≤ 1.10×", atMost(1.10))
	f, v, n = paired("Sandboxed ÷ plain cooperative cancel, median (%s; p50-ms)", "BenchmarkCancelCooperativeSandboxed", "BenchmarkCancelCooperativePlain", "BenchmarkCancelCooperative", "p50-ms")
	add(f, v, n, "×", "≤ 1.10×", atMost(1.10))
	if s.has("BenchmarkInvokeQuickPlain") {
		info("  `InvokeQuickSandboxed` time per run", "BenchmarkInvokeQuickSandboxed", "ns/op", "ns")
		info("  `InvokeQuickSandboxedNetwork` time per run", "BenchmarkInvokeQuickSandboxedNetwork", "ns/op", "ns")
		info("  `InvokeQuickPlain` time per run", "BenchmarkInvokeQuickPlain", "ns/op", "ns")
	}

	v, n = med("BenchmarkCancelStubborn", "overshoot-ms")
	add("Stubborn child: return after the ladder, mean overshoot (`CancelStubborn` overshoot-ms)", v, n, "ms", "≤ 10 ms", atMost(10))
	info("  `CancelStubborn` overshoot p99", "BenchmarkCancelStubborn", "p99-ms", "ms")

	v, n = med("BenchmarkPipeHolder", "return-ms")
	add("Grandchild holds stdout: return after the CLI's exit (`PipeHolder` return-ms)", v, n, "ms", "≤ 50 ms", atMost(50))
	info("  `PipeHolder` return p99", "BenchmarkPipeHolder", "p99-ms", "ms")

	v, n = med("BenchmarkConcurrentCancel1000", "all-reaped-ms")
	add("1000 runs cancelled at once, all reaped (`ConcurrentCancel1000` all-reaped-ms)", v, n, "ms", "< 2000 ms", lessThan(2000))
	v, n = med("BenchmarkConcurrentCancel1000", "cgroups-left")
	add("1000 runs cancelled at once, run cgroups left after them (`ConcurrentCancel1000` cgroups-left)", v, n, "", "0", atMost(0))
	v, n = med("BenchmarkConcurrentCancel1000", "heap-KiB-per-run")
	add("Live heap per in-flight run (`ConcurrentCancel1000` heap-KiB-per-run)", v, n, "KiB", "≤ 64 KiB", atMost(64))

	v, n = med("BenchmarkHugeLine64MiB", "peak-extra-MiB")
	add("64 MiB line through Invoke, peak extra memory (`HugeLine64MiB` peak-extra-MiB)", v, n, "MiB", "≤ 192 MiB (3× the line)", atMost(192))
	info("  `HugeLine64MiB` throughput", "BenchmarkHugeLine64MiB", "MB/s", "MB/s")

	v, n = ratio("BenchmarkMCPCall", "BenchmarkDirectInvoke", "ns/op")
	add("MCP round trip ÷ direct Invoke (`MCPCall` / `DirectInvoke`)", v, n, "×", "≤ 1.3×", atMost(1.3))
	info("  `MCPCall` time per call", "BenchmarkMCPCall", "ns/op", "ns")
	info("  `DirectInvoke` time per run", "BenchmarkDirectInvoke", "ns/op", "ns")

	v, n = ratio("BenchmarkTaskCreate", "BenchmarkTaskPlainCall", "ns/op")
	add("MCP task: a task-augmented call's answer ÷ a plain call (`TaskCreate` / `TaskPlainCall`)", v, n, "×", "≤ 1.3×", atMost(1.3))
	info("  `TaskCreate` time per task", "BenchmarkTaskCreate", "ns/op", "ns")
	v, n = med("BenchmarkFinishedTaskMemory", "heap-B/task")
	add("MCP task: heap per finished task kept for its TTL, 1 KiB answer (`FinishedTaskMemory` heap-B/task)", v, n, "B", "≤ 8192 B", atMost(8192))
	info("  the heap of 10,000 finished tasks (`FinishedTaskMemory` heap-MiB/10k)", "BenchmarkFinishedTaskMemory", "heap-MiB/10k", "MiB")

	// A busy host: the same runs beside 3000 idle processes (and none).
	for _, lvl := range []string{"cgroup", "tracking"} {
		quick := func(n string) string { return "BenchmarkBusyHost/bg=" + n + "/" + lvl + "/quick" }
		cancel := func(n string) string { return "BenchmarkBusyHost/bg=" + n + "/" + lvl + "/cancel" }
		target, ratioTarget := "≤ 1.10×", "≤ 1.25×"
		okQ, okC := atMost(1.10), atMost(1.25)
		if lvl == "tracking" {
			// The fallback lists /proc for each sweep: its figures are
			// reported with what bounds them (see the notes), not held
			// to a target.
			target, ratioTarget, okQ, okC = "", "", nil, nil
		}
		v, n = med(quick("3000"), "overhead-x")
		add(fmt.Sprintf("Busy host, %s level: Invoke ÷ raw os/exec beside 3000 idle processes (`BusyHost/bg=3000/%s/quick` overhead-x)", lvl, lvl), v, n, "×", target, okQ)
		info(fmt.Sprintf("  the same with no idle process (`BusyHost/bg=0/%s/quick` overhead-x)", lvl), quick("0"), "overhead-x", "×")
		v, n = ratio(cancel("3000"), cancel("0"), "p50-ms")
		add(fmt.Sprintf("Busy host, %s level: cooperative cancel median, 3000 idle processes ÷ none (`BusyHost/bg=3000/%s/cancel` / `bg=0` p50-ms)", lvl, lvl), v, n, "×", ratioTarget, okC)
		info(fmt.Sprintf("  `BusyHost/bg=0/%s/cancel` median (p50-ms)", lvl), cancel("0"), "p50-ms", "ms")
		info(fmt.Sprintf("  `BusyHost/bg=3000/%s/cancel` median (p50-ms)", lvl), cancel("3000"), "p50-ms", "ms")
	}

	v, n = s.med("BenchmarkCancelledTurnSweep", "sweep-x")
	add("Session: cancel → cancelled turn returned, with its sweep (3 processes) ÷ without (`CancelledTurnSweep` sweep-x)", v, n, "×", "", nil)
	info("  with the sweep (`CancelledTurnSweep` sweep-ms)", "BenchmarkCancelledTurnSweep", "sweep-ms", "ms")
	info("  without it (`CancelledTurnSweep` nosweep-ms)", "BenchmarkCancelledTurnSweep", "nosweep-ms", "ms")

	// Limits, accounting and admission: ratios of pairs run back to back
	// inside each iteration (medians of the per-iteration ratios), once
	// their benchmark has run.
	if s.has("BenchmarkLimits") {
		v, n = med("BenchmarkLimits", "limits-x")
		add("Run with memory, process and CPU limits ÷ without (`Limits` limits-x)", v, n, "×", "≤ 1.05×", atMost(1.05))
		v, n = med("BenchmarkLimits", "account-x")
		add("Accounted run ÷ one not accounted (`Limits` account-x)", v, n, "×", "", nil)
		v, n = med("BenchmarkLimits", "admit-x")
		add("Run admitted to a Budget with room ÷ no Budget (`Limits` admit-x)", v, n, "×", "≤ 1.01×", atMost(1.01))
		v, n = med("BenchmarkLimits", "fds-per-run")
		add("Descriptors the host holds per run in flight (`Limits` fds-per-run)", v, n, "", "≤ 4", atMost(4))
	}

	for _, cli := range []string{"codex", "gemini", "claude"} {
		info(fmt.Sprintf("Decoding the captured %s streams (`Decode/%s`)", cli, cli), "BenchmarkDecode/"+cli, "MB/s", "MB/s")
	}

	// Sessions on the fake agent: a warm turn against a cold Invoke of the
	// same prompt, and a turn's interrupt against a cancelled Invoke. The
	// ratios are medians of pairs run back to back inside each benchmark.
	for _, cli := range []string{"codex", "gemini", "claude"} {
		turn := "BenchmarkSession/" + cli + "/TurnVsInvoke"
		intr := "BenchmarkSession/" + cli + "/Interrupt"
		short := "`Session/" + cli + "/TurnVsInvoke`"
		v, n = med(turn, "warm/cold-first")
		add(fmt.Sprintf("Session, %s: warm turn ÷ cold Invoke of the same prompt, time to the first event (%s warm/cold-first)", cli, short), v, n, "×", "≤ 0.20×", atMost(0.20))
		info(fmt.Sprintf("  warm turn, first event (%s warm-first-ms)", short), turn, "warm-first-ms", "ms")
		info(fmt.Sprintf("  cold Invoke, first event (%s cold-first-ms)", short), turn, "cold-first-ms", "ms")
		v, n = med(turn, "warm/cold-result")
		add(fmt.Sprintf("Session, %s: warm turn ÷ cold Invoke of the same prompt, time to the result (%s warm/cold-result)", cli, short), v, n, "×", "≤ 0.20×", atMost(0.20))
		info(fmt.Sprintf("  warm turn, result (%s warm-result-ms)", short), turn, "warm-result-ms", "ms")
		info(fmt.Sprintf("  cold Invoke, result (%s cold-result-ms)", short), turn, "cold-result-ms", "ms")
		short = "`Session/" + cli + "/Interrupt`"
		v, n = med(intr, "interrupt/invoke-cancel")
		add(fmt.Sprintf("Session, %s: cancel → interrupted turn ended ÷ cancel → cancelled Invoke returned (%s interrupt/invoke-cancel)", cli, short), v, n, "×", "≤ 1.00×", atMost(1))
		info(fmt.Sprintf("  interrupt → turn ended (%s interrupt-ms)", short), intr, "interrupt-ms", "ms")
		info(fmt.Sprintf("  cancel → Invoke returned (%s invoke-cancel-ms)", short), intr, "invoke-cancel-ms", "ms")
	}

	// The same with the real CLIs (e2e, BENCH_E2E=1), only when they ran.
	if s.has("BenchmarkSessionTurnVsInvoke/") || s.has("BenchmarkSessionInterrupt/") {
		for _, cli := range []string{"codex", "gemini", "claude"} {
			turn := "BenchmarkSessionTurnVsInvoke/" + cli
			intr := "BenchmarkSessionInterrupt/" + cli
			short := "`e2e SessionTurnVsInvoke/" + cli + "`"
			v, n = med(turn, "warm/cold-first")
			add(fmt.Sprintf("Real CLI (e2e), %s: warm turn ÷ cold Invoke, time to the first event (%s warm/cold-first)", cli, short), v, n, "×", "≤ 0.20×", atMost(0.20))
			info(fmt.Sprintf("  warm turn, first event (%s warm-first-ms)", short), turn, "warm-first-ms", "ms")
			info(fmt.Sprintf("  cold Invoke, first event (%s cold-first-ms)", short), turn, "cold-first-ms", "ms")
			v, n = med(turn, "warm/cold-result")
			add(fmt.Sprintf("Real CLI (e2e), %s: warm turn ÷ cold Invoke, time to the result (%s warm/cold-result)", cli, short), v, n, "×", "≤ 0.20×", atMost(0.20))
			info(fmt.Sprintf("  warm turn, result (%s warm-result-ms)", short), turn, "warm-result-ms", "ms")
			info(fmt.Sprintf("  cold Invoke, result (%s cold-result-ms)", short), turn, "cold-result-ms", "ms")
			info(fmt.Sprintf("Real CLI (e2e), %s: resident memory of a warm session's tree, idle after its turns (%s warm-rss-MiB)", cli, short), turn, "warm-rss-MiB", "MiB")
			short = "`e2e SessionInterrupt/" + cli + "`"
			info(fmt.Sprintf("Real CLI (e2e), %s: cancel → interrupted turn ended ÷ cancel → cancelled Invoke returned (%s interrupt/invoke-cancel)", cli, short), intr, "interrupt/invoke-cancel", "×")
			info(fmt.Sprintf("  interrupt → turn ended (%s interrupt-ms)", short), intr, "interrupt-ms", "ms")
			info(fmt.Sprintf("  cancel → Invoke returned (%s invoke-cancel-ms)", short), intr, "invoke-cancel-ms", "ms")
		}
	}

	// Two-way control: what an approval and an in-band Go tool call add
	// to a turn on the echo CLI (the engine's part), and, with the real
	// CLIs, a turn through an approval or a Go tool against the CLI's own
	// tool doing the same work.
	if s.has("BenchmarkControlRoundTrip") {
		info("Two-way control, engine: a plain turn on the echo CLI (`ControlRoundTrip` plain-turn-ms)", "BenchmarkControlRoundTrip", "plain-turn-ms", "ms")
		info("  added by one approval round trip (`ControlRoundTrip` approval-added-ms)", "BenchmarkControlRoundTrip", "approval-added-ms", "ms")
		info("  added by one in-band Go tool call, initialize included (`ControlRoundTrip` gotool-added-ms)", "BenchmarkControlRoundTrip", "gotool-added-ms", "ms")
	}
	if s.has("BenchmarkApproval/") || s.has("BenchmarkGoTool/") {
		for _, cli := range []string{"codex", "gemini", "claude"} {
			a, g := "BenchmarkApproval/"+cli, "BenchmarkGoTool/"+cli
			info(fmt.Sprintf("Real CLI (e2e), %s: a turn whose command the callback approved ÷ the same turn with the command allowed by the level (`e2e Approval/%s` approval/own)", cli, cli), a, "approval/own", "×")
			info(fmt.Sprintf("  approved turn (`e2e Approval/%s` approved-turn-ms)", cli), a, "approved-turn-ms", "ms")
			info(fmt.Sprintf("  allowed turn (`e2e Approval/%s` own-turn-ms)", cli), a, "own-turn-ms", "ms")
			info(fmt.Sprintf("  approved command, tool call → result (`e2e Approval/%s` approved-tool-ms)", cli), a, "approved-tool-ms", "ms")
			info(fmt.Sprintf("  allowed command, tool call → result (`e2e Approval/%s` own-tool-ms)", cli), a, "own-tool-ms", "ms")
			info(fmt.Sprintf("Real CLI (e2e), %s: a turn calling a Go tool ÷ the same work by the CLI's own shell tool (`e2e GoTool/%s` gotool/own)", cli, cli), g, "gotool/own", "×")
			info(fmt.Sprintf("  Go tool turn (`e2e GoTool/%s` gotool-turn-ms)", cli), g, "gotool-turn-ms", "ms")
			info(fmt.Sprintf("  own tool turn (`e2e GoTool/%s` own-turn-ms)", cli), g, "own-turn-ms", "ms")
			info(fmt.Sprintf("  Go tool, call → result (`e2e GoTool/%s` gotool-ms)", cli), g, "gotool-ms", "ms")
			info(fmt.Sprintf("  own shell tool, call → result (`e2e GoTool/%s` own-tool-ms)", cli), g, "own-tool-ms", "ms")
		}
	}

	// Survivors: the largest count any run of any benchmark reported.
	worst, runs := math.NaN(), 0
	for _, units := range s {
		for _, v := range units["survivors"] {
			if math.IsNaN(worst) || v > worst {
				worst = v
			}
			runs++
		}
	}
	add("Processes alive after Invoke returned or a session closed, worst run of any benchmark (`survivors`)", worst, runs, "", "0", atMost(0))
	return out
}

func format(v float64, unit string) string {
	if math.IsNaN(v) {
		return "not run"
	}
	var s string
	switch {
	case unit == "ns":
		return fmt.Sprintf("%.2f ms", v/1e6)
	case unit == "×" && math.Abs(v) < 0.1:
		// Two significant digits, so that a warm turn against a CLI's
		// seconds of start-up does not read as 0.00×.
		return strconv.FormatFloat(v, 'g', 2, 64) + "×"
	case unit == "×":
		return fmt.Sprintf("%.2f×", v)
	case unit == "level":
		return map[float64]string{1: "cgroup", 2: "tracking", 3: "job", 4: "group"}[v]
	case v == math.Trunc(v) && math.Abs(v) < 1e6:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	default:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	}
	if unit != "" {
		s += " " + unit
	}
	return s
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return runtime.GOOS
	}
	return runtime.GOOS + " " + strings.TrimSpace(string(b))
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// tableHeader opens the table of figures in BENCHMARKS.md.
const tableHeader = "| Figure | Value | Target | Met | Runs |"

// tableLines renders the table of figures: its header, its separator and
// one line per row.
func tableLines(rs []row) []string {
	out := []string{tableHeader, "|---|---:|---|:---:|---:|"}
	for _, r := range rs {
		fig := r.figure
		if strings.HasPrefix(fig, "  ") {
			fig = "&nbsp;&nbsp;" + strings.TrimSpace(fig)
		}
		out = append(out, fmt.Sprintf("| %s | %s | %s | %s | %d |", fig, r.shown(), orDash(r.target), r.met(), r.n))
	}
	return out
}

// shown formats the row's value; a ratio that misses its target gets three
// significant digits, so that 0.204× does not read as the 0.20× it misses.
func (r row) shown() string {
	if r.unit == "×" && r.ok != nil && !math.IsNaN(r.value) && !r.ok(r.value) {
		return strconv.FormatFloat(r.value, 'g', 3, 64) + "×"
	}
	return format(r.value, r.unit)
}

// met is the table's Met column: empty without a target.
func (r row) met() string {
	switch {
	case r.ok == nil:
		return ""
	case math.IsNaN(r.value):
		return "?"
	case r.ok(r.value):
		return "yes"
	}
	return "**no**"
}

func write(w io.Writer, s samples, cpu string, raw []string, notes string) {
	rs := rows(s)
	fmt.Fprintf(w, "# Benchmarks\n\n")
	fmt.Fprintf(w, "Generated by `scripts/bench` (parsed by `scripts/benchreport`) on %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "| Machine | |\n|---|---|\n")
	fmt.Fprintf(w, "| CPU | %s |\n", orDash(cpu))
	fmt.Fprintf(w, "| Cores | %d |\n", runtime.NumCPU())
	fmt.Fprintf(w, "| Go | %s %s/%s |\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "| Kernel | %s |\n", kernel())
	if l := loadavg(); l != "" {
		fmt.Fprintf(w, "| Load average after the run | %s |\n", l)
	}
	fmt.Fprintf(w, "\nEvery process-starting benchmark runs the test binary as the fake agent\n"+
		"(internal/testkit/fakeagent). Each figure is the median over the runs counted in\n"+
		"the last column; a ratio is the median of the ratios of paired runs, the\n"+
		"target and its baseline run back to back (alternating which goes first).\n"+
		"Indented rows are context without a target.\n\n")
	for _, l := range tableLines(rs) {
		fmt.Fprintln(w, l)
	}
	if notes != "" {
		fmt.Fprintf(w, "\n## Notes\n\n%s\n", strings.TrimSpace(notes))
	}
	fmt.Fprintf(w, "\n## How each figure is measured\n\n%s", methods)
	if len(raw) > 0 {
		fmt.Fprintf(w, "\n## Raw output\n\n<details><summary>go test -bench output, all rounds</summary>\n\n```\n")
		for _, l := range raw {
			fmt.Fprintln(w, l)
		}
		fmt.Fprintf(w, "```\n\n</details>\n")
	}
}

const methods = `- **InvokeQuick / RawExecQuick** (invoker/bench_test.go): a fake Codex that
  answers at once, through Invoke (with the post-exit sweep of the tree) and
  through bare os/exec reading stdout to EOF.
- **CancelCooperative**: the fake stalls after its answer; cancel() is called
  once the first event arrived, and the time until Invoke returns (the tree
  reaped) is taken. The fake exits on SIGINT, the ladder's first step.
- **RawSignalCooperative**: the baseline of CancelCooperative: the same
  fake under bare os/exec (exec.CommandContext whose Cancel sends SIGINT,
  then Wait), run in a goroutine and cancelled the same way; all a wrapper
  without a tree guarantee does.
- **InvokeQuickSandboxed / CancelCooperativeSandboxed**
  (invoker/driver/bench_sandbox_linux_test.go): InvokeQuick and
  CancelCooperative under a required filesystem sandbox at ReadOnly (the
  Landlock ruleset built and applied on the thread that forks the CLI, the
  private TMPDIR made and removed); InvokeQuickSandboxedNetwork adds the
  network rules "none" (the namespace made and entered, the proxy's
  listener opened, served and closed). Each is paired with a baseline run
  of its own, InvokeQuickPlain or CancelCooperativePlain (the same work,
  no sandbox), back to back, alternating which goes first, three pairs
  per round; a ratio pairs each run with the baseline run printed beside
  it.
- **CancelStubborn**: the fake ignores SIGINT and SIGTERM; grace periods of
  25 ms + 25 ms; the overshoot is the return time minus those 50 ms.
- **PipeHolder**: the fake leaves a grandchild holding its stdout and stderr
  and exits; measured from its terminal event (printed just before it
  exits) to Invoke's return.
- **ConcurrentCancel1000**: 1000 runs on one Invoker; once each has printed
  its first event, one cancel() stops them all. cgroups-left counts the
  runs' cgroups still present 10 s later (they are removed in batches just
  after their runs; 0 where runs are not in cgroups). The heap figure is the live
  heap (after a GC) while they are in flight, over the heap before, per run.
- **HugeLine64MiB**: a fake printing one 64 MiB event line; the host's peak
  resident memory during Invoke (VmHWM, reset through /proc/self/clear_refs)
  over its resident memory before. The engine's test decoder keeps no copy
  of the line beyond the event's Raw.
- **BusyHost/bg=N/LEVEL/{quick,cancel}** (invoker/bench_linux_test.go):
  N idle processes (0 or 3000: forked shells blocked on a read, children of
  one holder shell, not of the benchmark) are started once per N, then at
  the cgroup and at the tracking level (invoker.Options.Containment) the quick fake
  runs through bare os/exec and through Invoke back to back in every
  iteration (overhead-x is the ratio of their medians), and the stalling
  fake is cancelled as in CancelCooperative. Afterwards every idle process
  is killed by pid and proven gone (no process with its tag is left).
  scripts/bench runs bg=0 and bg=3000 as separate runs, alternating which
  goes first; the cancel ratio pairs them round by round.
- **MCPCall / DirectInvoke** (mcpadapter/bench_test.go): the codex backend
  on a fake Codex, called as an MCP tool over in-memory transports (one
  client session) and through Invoke.
- **TaskCreate / TaskPlainCall** (mcpadapter/tasks_bench_test.go): a
  task-augmented tools/call answered with its task, against a plain call,
  over in-memory transports, of an invoker that answers at once; the task's
  run is let finish outside the timer.
- **FinishedTaskMemory**: the live heap after 10,000 tasks have finished
  (each answer 1 KiB, fetched with tasks/result) and are kept for their TTL
  in the default MemoryTaskStore, measured after a GC.
- **Decode/{codex,gemini,claude}** (each backend's decode_bench_test.go):
  every captured stream in testdata/*.stdout, a fresh decoder per stream.
- **Session/{codex,gemini,claude}/TurnVsInvoke** (each backend's
  session_bench_test.go, through internal/testkit/fakeagent/agenttest's
  BenchSessions): one session is opened on the fake agent and given a
  first turn; then in every iteration the same prompt runs as a turn of
  that session and as a cold Invoke (the fake started for it), back to
  back, alternating which goes first. The fake answers at once in one
  message, so neither pays model time. Taken from the call: the time to
  the first event (OnEvent) and to the return; the warm/cold figures are
  the medians of the per-iteration ratios.
- **Session/{codex,gemini,claude}/Interrupt**: the same session and a
  cold Invoke of a turn that stalls after its first message
  (fakeagent.PromptStall); the context is cancelled from OnEvent on that
  message, and the time from the cancel to the return is taken: for the
  session, the CLI's own interrupt until the turn ended (the session must
  stay open); for Invoke, SIGINT until the tree is gone. Both must end
  with the context's error. Back to back, alternating which goes first.
- **e2e SessionTurnVsInvoke/CLI, SessionInterrupt/CLI**
  (e2e/sessions_bench_test.go, only with BENCH_E2E=1): the same pairs
  with the real pinned CLIs (installed by e2e/run) against the loopback
  fake model; the interrupt is taken 100 ms after the model was called,
  while its answer stalls. warm-rss-MiB is the resident memory (VmRSS,
  summed over the processes, as ps shows them) of the session's CLI and
  everything it started, idle after the benchmark's turns, once every
  cold Invoke's tree is gone.
- **ControlRoundTrip** (invoker/driver/control_test.go): one session on
  the echo CLI (cat: every line the protocol writes comes back as what
  the CLI said) and, in every iteration, a plain turn and a turn that
  asks one approval (allowed by the callback), back to back, alternating
  which goes first, then a turn that calls one Go tool in band
  (initialize, initialized, tools/call through the bridge to a go-sdk
  server). The added figures are the turns' time over the plain turn's:
  the engine's part of a round trip, with next to no CLI in it.
- **e2e Approval/CLI, GoTool/CLI** (e2e/twoway_<cli>_test.go, only with
  BENCH_E2E=1): with the real pinned CLIs against the fake model, warm
  sessions: a turn whose shell command the Approve callback allows against
  the same turn with the command allowed by the permission level (no
  callback), and a turn calling a Go tool against one where the CLI's own
  shell tool does the same work; back to back in every iteration. Each
  turn is timed whole (the model answers at once: two model requests),
  and from its tool call's event to its result's (Codex and Gemini CLI
  report a shell command that needs no approval only once it has run, so
  their own-tool figures miss the run: compare their turns).
- **Limits** (invoker/driver/bench_limits_linux_test.go): the quick fake of
  InvokeQuick, in every iteration three pairs back to back (alternating which
  goes first): a run with memory, process and CPU limits (those the host
  can enforce; limits-x is 0 where it can enforce none) against one without,
  an accounted run against one not accounted (accounting is on for every
  run; off only for this baseline), and a run admitted to a Budget with room
  against one with no Budget. Each figure is the median of the
  per-iteration ratios. fds-per-run: 50 runs stalled after their answer at
  once, the host's open descriptors then over before, per run.
- **survivors**: processes carrying the benchmark's tag still alive after
  the last Invoke returned (a /proc scan of environments).
`

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("benchreport: ")
	out := flag.String("o", "BENCHMARKS.md", "output file (- for stdout)")
	notesFile := flag.String("notes", "", "Markdown file copied under a Notes heading")
	docs := flag.Bool("docs", false, "rewrite the figures regions of the Markdown files named as arguments (default README.md e2e/README.md docs/*.md) from the raw output stored in the -o file")
	flag.Parse()
	if *docs {
		if err := rewriteDocs(*out, flag.Args()); err != nil {
			log.Fatal(err)
		}
		return
	}
	var notes string
	if *notesFile != "" {
		b, err := os.ReadFile(*notesFile)
		if err != nil {
			log.Fatal(err)
		}
		notes = string(b)
	}
	if flag.NArg() == 0 {
		log.Fatal("usage: benchreport [-o file] bench-output.txt...")
	}
	s := samples{}
	var cpu string
	var raw []string
	for _, name := range flag.Args() {
		b, err := os.ReadFile(name)
		if err != nil {
			log.Fatal(err)
		}
		if err := parse(strings.NewReader(string(b)), s, &cpu); err != nil {
			log.Fatal(err)
		}
		for l := range strings.Lines(string(b)) {
			if strings.HasPrefix(l, "Benchmark") {
				raw = append(raw, strings.TrimRight(l, "\n"))
			}
		}
	}
	if len(s) == 0 {
		log.Fatal("no benchmark results in the input")
	}
	w := io.Writer(os.Stdout)
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		w = f
	}
	write(w, s, cpu, raw, notes)
}
