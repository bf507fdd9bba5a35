package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
)

func TestMain(m *testing.M) {
	fakeagent.Main() // demo re-executes its own binary, here the test binary
	goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
}

// The README's first command: for every CLI flavour, and once with an
// agent that ignores SIGINT and SIGTERM (the ladder's two seconds), the demo
// cancels a run and finds no survivor (demo returns an error if any process
// of the tree is alive after Invoke). Before that, with two-way control,
// it shows what it claims: the denied command asked about and not run,
// the denial in the agent's answer (with its message where the CLI
// carries one), the allowed command run, the Go tool called with the
// agent's arguments and its result in the answer.
func TestDemo(t *testing.T) {
	tests := []struct {
		cli      string
		stubborn bool
		twoway   bool
	}{{"codex", false, true}, {"gemini", false, true}, {"claude", false, true}, {"claude", true, false}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/stubborn=%v/twoway=%v", tt.cli, tt.stubborn, tt.twoway), func(t *testing.T) {
			var out strings.Builder
			if err := demo(&out, tt.cli, 300*time.Millisecond, tt.stubborn, tt.twoway); err != nil {
				t.Errorf("demo(%s, stubborn=%v, twoway=%v) = %v", tt.cli, tt.stubborn, tt.twoway, err)
			}
			got := out.String()
			t.Logf("output:\n%s", got)

			// The level, said first in plain words, is the one that held
			// the run; no record of the engine says it again as if it
			// were an error.
			machine := regexp.MustCompile(`(?m)^Containment level on this machine: (\w+)\.\n  \S`).FindStringSubmatch(got)
			run := regexp.MustCompile(`(?m)^  containment: (\w+) `).FindStringSubmatch(got)
			if machine == nil || run == nil || machine[1] != run[1] {
				t.Errorf("output gives the machine's containment level as %q and the run's as %q, want one level, explained", machine, run)
			}
			if strings.Contains(got, "unavailable; tracking") {
				t.Errorf("output repeats the level's fallback as an engine record")
			}

			var want []string // in this order
			if tt.twoway {
				denial := `the agent answered: "denied"`
				if tt.cli == "claude" {
					denial = `the agent answered: "denied: ` + denyMessage + `"`
				}
				want = append(want,
					`Approve(Kind: "command", Command: `, // the agent asked to run the command
					`-> deny: "`+denyMessage+`"`,
					askFile+" exists: false",
					denial,
					`Approve(Kind: "command", Command: `,
					"-> allow",
					`Go tool handler: tickets/create called with title="Parser: one-pass rewrite" priority="high"`,
					askFile+" exists: true",
					`the agent answered: "approved\nFiled ticket #42: Parser: one-pass rewrite."`,
				)
			} else if strings.Contains(got, "Two-way") {
				t.Errorf("with twoway=false, the output shows two-way control")
			}
			want = append(want,
				"Running a fake "+tt.cli+" agent",
				"cancelled:  true",
				"survivors: 0",
			)
			rest := got
			for _, w := range want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Errorf("output lacks %q (in this place)", w)
					continue
				}
				rest = rest[i+len(w):]
			}
		})
	}
}
