package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// sessionOutput is two rounds of the session benchmarks of one backend, as
// `go test -bench` prints them, and one round of the e2e ones.
const sessionOutput = `goos: linux
pkg: github.com/clinvoke/clinvoke/codex
cpu: Test CPU
BenchmarkSession/codex/TurnVsInvoke-2   	      50	   3431874 ns/op	         2.720 cold-first-ms	         3.049 cold-result-ms	         0 survivors	         0.09578 warm-first-ms	         0.2964 warm-result-ms	         0.04643 warm/cold-first	         0.09940 warm/cold-result
BenchmarkSession/codex/Interrupt-2      	      50	   5219291 ns/op	         0.1265 interrupt-ms	         0.4234 interrupt/invoke-cancel	         0.2971 invoke-cancel-ms	         0 survivors
BenchmarkSession/codex/TurnVsInvoke-2   	      50	   3431874 ns/op	         2.720 cold-first-ms	         3.049 cold-result-ms	         0 survivors	         0.09578 warm-first-ms	         0.2964 warm-result-ms	         0.40 warm/cold-first	         0.09940 warm/cold-result
BenchmarkSession/codex/Interrupt-2      	      50	   5219291 ns/op	         0.1265 interrupt-ms	         0.6 interrupt/invoke-cancel	         0.2971 invoke-cancel-ms	         1 survivors
BenchmarkSessionInterrupt/claude-2      	       3	 900000000 ns/op	       300.0 interrupt-ms	         2.5 interrupt/invoke-cancel	       120.0 invoke-cancel-ms
`

func TestSessionRows(t *testing.T) {
	s := samples{}
	var cpu string
	if err := parse(strings.NewReader(sessionOutput), s, &cpu); err != nil {
		t.Fatal(err)
	}
	byFigure := map[string]row{}
	for _, r := range rows(s) {
		byFigure[r.figure] = r
	}
	find := func(prefix string) row {
		t.Helper()
		for f, r := range byFigure {
			if strings.HasPrefix(f, prefix) {
				return r
			}
		}
		t.Fatalf("no row starts with %q", prefix)
		return row{}
	}
	for _, tc := range []struct {
		prefix string
		want   float64
		n      int
		met    bool
	}{
		// The median of two rounds: (0.04643+0.40)/2 misses 0.20×.
		{"Session, codex: warm turn ÷ cold Invoke of the same prompt, time to the first event", (0.04643 + 0.40) / 2, 2, false},
		{"Session, codex: warm turn ÷ cold Invoke of the same prompt, time to the result", 0.09940, 2, true},
		{"Session, codex: cancel → interrupted turn ended", (0.4234 + 0.6) / 2, 2, true},
		{"Real CLI (e2e), claude: cancel → interrupted turn ended", 2.5, 1, true},
		{"Processes alive after Invoke returned or a session closed", 1, 4, false},
	} {
		r := find(tc.prefix)
		if math.Abs(r.value-tc.want) > 1e-9 || r.n != tc.n {
			t.Errorf("%s: value %v over %d runs, want %v over %d", tc.prefix, r.value, r.n, tc.want, tc.n)
		}
		if met := r.ok == nil || r.ok(r.value); met != tc.met {
			t.Errorf("%s: met = %v, want %v", tc.prefix, met, tc.met)
		}
	}
	if r := find("Session, gemini: warm turn ÷ cold Invoke of the same prompt, time to the result"); !math.IsNaN(r.value) {
		t.Errorf("gemini did not run, its row says %v", r.value)
	}
}

func TestNoE2ERowsWithoutE2E(t *testing.T) {
	s := samples{}
	var cpu string
	in := strings.Split(sessionOutput, "BenchmarkSessionInterrupt/")[0]
	if err := parse(strings.NewReader(in), s, &cpu); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows(s) {
		if strings.Contains(r.figure, "e2e") {
			t.Errorf("row %q without any e2e run", r.figure)
		}
	}
}

func TestFormatSmallRatio(t *testing.T) {
	for v, want := range map[float64]string{0.002957: "0.003×", 0.0678: "0.068×", 0.1723: "0.17×", 1.05: "1.05×"} {
		if got := format(v, "×"); got != want {
			t.Errorf("format(%v, ×) = %q, want %q", v, got, want)
		}
	}
}

// sandboxLine is one result line of benchmark name taking ns per run.
func sandboxLine(name string, ns float64) string {
	return fmt.Sprintf("%s-2   \t     100\t  %.0f ns/op\t         0 survivors\n", name, ns)
}

// The sandboxed rows pair each run with its baseline's run printed beside
// it, whichever went first, never with a run of another pair or of
// another block sharing the baseline, and fall back to the plain
// benchmarks of older output that has no such pairs.
func TestSandboxedRowsPairRunsBeside(t *testing.T) {
	const (
		quick   = "BenchmarkInvokeQuick"
		raw     = "BenchmarkRawExecQuick"
		sb      = "BenchmarkInvokeQuickSandboxed"
		net     = "BenchmarkInvokeQuickSandboxedNetwork"
		plain   = "BenchmarkInvokeQuickPlain"
		sbRow   = "Sandboxed ÷ plain Invoke, quick answer"
		netRow  = "Sandboxed with network rules \"none\" ÷ plain Invoke, quick answer"
		rawRow  = "Invoke ÷ raw os/exec, quick answer"
		pairTag = "run beside it"
	)
	type run struct {
		name string
		ns   float64
	}
	for _, tc := range []struct {
		name    string
		runs    []run
		row     string
		want    float64
		n       int
		pairing bool // whether the figure says its runs were paired by place
	}{{
		// Three pairs alternating which goes first: 1.1, 1.2 and 1.6;
		// pairing by order of the runs of each name would give the same,
		// pairing the first sandboxed run with the plain run before it
		// would not.
		name: "alternating",
		runs: []run{{sb, 110}, {plain, 100}, {plain, 100}, {sb, 120}, {sb, 160}, {plain, 100}},
		row:  sbRow, want: 1.2, n: 3, pairing: true,
	}, {
		// Two blocks sharing the baseline, a third between them: each
		// sandboxed run pairs inside its block.
		name: "blocks sharing a baseline",
		runs: []run{
			{sb, 110}, {plain, 100}, {plain, 50}, {sb, 60},
			{"BenchmarkCancelCooperativeSandboxed", 1}, {"BenchmarkCancelCooperativePlain", 1},
			{plain, 200}, {net, 300}, {net, 120}, {plain, 100},
		},
		row: netRow, want: (1.5 + 1.2) / 2, n: 2, pairing: true,
	}, {
		// The baseline run between two sandboxed runs pairs with the
		// first of them only (each baseline run pairs once); the second
		// has none and counts for nothing.
		name: "a run without its baseline",
		runs: []run{{sb, 130}, {plain, 100}, {sb, 900}},
		row:  sbRow, want: 1.3, n: 1, pairing: true,
	}, {
		// A baseline run elsewhere does not make a pair, nor does the
		// plain benchmark of the other pairs.
		name: "alone among others",
		runs: []run{{plain, 100}, {raw, 1}, {sb, 130}, {quick, 1}, {plain, 100}},
		row:  sbRow, want: math.NaN(), n: 0, pairing: true,
	}, {
		// Older output: the sandboxed benchmark once per round, against
		// the plain runs of the round (the ratio of the medians when the
		// counts differ).
		name: "older output",
		runs: []run{{raw, 80}, {quick, 100}, {quick, 100}, {raw, 80}, {sb, 130}},
		row:  sbRow, want: 1.3, n: 1,
	}, {
		// The sandboxed pairs leave the Invoke ÷ os/exec pairs alone.
		name: "raw pairs untouched",
		runs: []run{{raw, 50}, {quick, 100}, {quick, 60}, {raw, 50}, {sb, 130}, {plain, 100}},
		row:  rawRow, want: (2 + 1.2) / 2, n: 2,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var in strings.Builder
			for _, r := range tc.runs {
				in.WriteString(sandboxLine(r.name, r.ns))
			}
			s := samples{}
			var cpu string
			if err := parse(strings.NewReader(in.String()), s, &cpu); err != nil {
				t.Fatal(err)
			}
			var got *row
			for _, r := range rows(s) {
				if strings.HasPrefix(r.figure, tc.row) {
					got = &r
					break
				}
			}
			if got == nil {
				t.Fatalf("no row starts with %q", tc.row)
			}
			if strings.Contains(got.figure, pairTag) != tc.pairing {
				t.Errorf("figure %q: says it pairs by place %v, want %v", got.figure, !tc.pairing, tc.pairing)
			}
			if math.IsNaN(tc.want) {
				if !math.IsNaN(got.value) || got.n != 0 {
					t.Errorf("%s = %v over %d runs, want none", got.figure, got.value, got.n)
				}
				return
			}
			if math.Abs(got.value-tc.want) > 1e-9 || got.n != tc.n {
				t.Errorf("%s = %v over %d runs, want %v over %d", got.figure, got.value, got.n, tc.want, tc.n)
			}
			if tc.pairing && len(got.rounds) != got.n {
				t.Errorf("%s: %d ratios kept for %d runs", got.figure, len(got.rounds), got.n)
			}
		})
	}
}
