package main

import (
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
