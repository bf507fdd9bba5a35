package fakeagent

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
)

// A sessionProto drives one session protocol of the fake.
type sessionProto struct {
	flavor string
	args   []string
	open   []string            // lines written before the first turn
	turn   func(n int) string  // the line that starts turn n
	first  func(l []byte) bool // whether l is the turn's first event
	ends   func(l []byte) bool
}

var sessionProtos = []sessionProto{{
	flavor: Claude,
	args:   []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"},
	turn: func(n int) string {
		return fmt.Sprintf(`{"type":"user","message":{"role":"user","content":"turn %d"}}`, n)
	},
	first: func(l []byte) bool { return bytes.Contains(l, []byte(`"type":"system"`)) },
	ends:  func(l []byte) bool { return bytes.Contains(l, []byte(`"type":"result"`)) },
}, {
	flavor: Codex,
	args:   []string{"app-server"},
	open: []string{
		`{"id":1,"method":"initialize","params":{"clientInfo":{"name":"test","version":"1"}}}`,
		`{"method":"initialized"}`,
		`{"id":2,"method":"thread/start","params":{}}`,
	},
	turn: func(n int) string {
		return fmt.Sprintf(`{"id":%d,"method":"turn/start","params":{"threadId":"t","input":[{"type":"text","text":"turn %d"}]}}`, 10+n, n)
	},
	first: func(l []byte) bool { return bytes.Contains(l, []byte(`"method":"turn/started"`)) },
	ends:  func(l []byte) bool { return bytes.Contains(l, []byte(`"method":"turn/completed"`)) },
}, {
	flavor: Gemini,
	args:   []string{"--acp"},
	open: []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`,
	},
	turn: func(n int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"turn %d"}]}}`, 10+n, n)
	},
	first: func(l []byte) bool { return bytes.Contains(l, []byte(`"method":"session/update"`)) },
	ends:  func(l []byte) bool { return bytes.Contains(l, []byte(`"stopReason"`)) },
}}

// roles returns the roles of ps.
func roles(ps []Proc) []string {
	var rs []string
	for _, p := range ps {
		rs = append(rs, p.Role)
	}
	slices.Sort(rs)
	return rs
}

// TestSessionTurnSpawns checks, for the three session protocols, that
// SessionHelper starts one helper at session start that every turn uses,
// and that TurnSpawns makes each turn start a grandchild in the fake's
// group, a setsid daemon and an env -i daemon, recorded with the turn's
// number; and that a turn whose helper was killed ends the fake with
// status 4.
func TestSessionTurnSpawns(t *testing.T) {
	t.Parallel()
	for _, sp := range sessionProtos {
		t.Run(sp.flavor, func(t *testing.T) {
			t.Parallel()
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			r := start(t, Script{Flavor: sp.flavor, SessionHelper: true, TurnSpawns: true}, pr, sp.args...)
			pr.Close()
			t.Cleanup(func() { pw.Close() })
			write := func(l string) {
				t.Helper()
				if _, err := pw.WriteString(l + "\n"); err != nil {
					t.Fatal(err)
				}
			}
			for _, l := range sp.open {
				write(l)
			}
			// turn runs turn n and returns what the record held at the
			// turn's first event.
			turn := func(n int) []Proc {
				t.Helper()
				write(sp.turn(n))
				for !sp.first(r.next()) {
				}
				procs := r.record().Turn(n)
				for !sp.ends(r.next()) {
				}
				return procs
			}
			agentStat := func() stat { return procOf(t, r.cmd.Process.Pid) }
			wantRoles := []string{roleTurnDaemon, roleTurnDaemonStart, roleTurnEnviStart, roleTurnEnvi, roleTurnGrandchild}
			slices.Sort(wantRoles)
			for n := 1; n <= 2; n++ {
				if early := turn(n); len(early) != len(wantRoles) {
					t.Errorf("turn %d: at its first event the record held %+v, want its %d processes", n, early, len(wantRoles))
				}
				rec := r.record()
				var helpers []Proc
				for _, p := range rec.Procs {
					if p.Role == roleSessionHelper {
						helpers = append(helpers, p)
					}
				}
				if len(helpers) != 1 || helpers[0].Turn != 0 || !alive(helpers[0]) {
					t.Fatalf("after turn %d: session helpers %+v, want one, alive, of no turn", n, helpers)
				}
				if h := procOf(t, helpers[0].Pid); h.ppid != r.cmd.Process.Pid || h.pgrp != agentStat().pgrp {
					t.Errorf("session helper ppid, pgrp = %d, %d; want the agent %d and its group", h.ppid, h.pgrp, r.cmd.Process.Pid)
				}
				procs := rec.Turn(n)
				if got := roles(procs); !slices.Equal(got, wantRoles) {
					t.Fatalf("turn %d recorded %v, want %v", n, got, wantRoles)
				}
				for _, p := range procs {
					st, live := readStat(p.Pid)
					switch p.Role {
					case roleTurnGrandchild:
						if !live || st.pgrp != agentStat().pgrp || st.ppid != r.cmd.Process.Pid {
							t.Errorf("turn %d grandchild %d: pgrp %d ppid %d, want the agent's group and the agent", n, p.Pid, st.pgrp, st.ppid)
						}
					case roleTurnDaemon, roleTurnEnvi:
						if !live || st.session != p.Pid || st.ppid == r.cmd.Process.Pid {
							t.Errorf("turn %d %s %d: session %d ppid %d, want a session of its own, orphaned", n, p.Role, p.Pid, st.session, st.ppid)
						}
						env, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/environ")
						if err != nil {
							t.Fatal(err)
						}
						tagged := bytes.Contains(env, []byte(EnvTag+"=")) || bytes.Contains(env, []byte(EnvOwner+"="))
						if tagged != (p.Role == roleTurnDaemon) {
							t.Errorf("turn %d %s %d: tag or owner in its environment = %v, want %v", n, p.Role, p.Pid, tagged, p.Role == roleTurnDaemon)
						}
					}
					if p.Role == roleTurnDaemonStart || p.Role == roleTurnEnviStart {
						// It has closed its files, so it is exiting.
						require.Eventually(t, func() bool { return !alive(p) }, lineTimeout, time.Millisecond,
							"turn %d %s %d still alive", n, p.Role, p.Pid)
					} else if !alive(p) {
						t.Errorf("turn %d %s %d is not alive", n, p.Role, p.Pid)
					}
				}
				if earlier := rec.Turn(n - 1); n > 1 && len(earlier) != len(wantRoles) {
					t.Errorf("turn %d: turn %d's record changed: %+v", n, n-1, earlier)
				}
			}
			helper := r.record().Pid(roleSessionHelper)
			syscall.Kill(helper, syscall.SIGKILL)
			write(sp.turn(3))
			r.rest()
			if code := r.wait(); code != 4 {
				t.Errorf("exit code after the session helper was killed = %d, want 4", code)
			}
			if e := r.stderrText(); !strings.Contains(e, "the session helper is gone") {
				t.Errorf("stderr = %q, want it to say the session helper is gone", e)
			}
		})
	}
}

// TestHelpersEndWithOwner: the helpers a fake starts, the env -i daemon of
// TurnSpawns included (which a library at the tracking level cannot find,
// and Orphans cannot see), sleep on while the process that made the
// script runs, and end as soon as it exits, so that no test binary leaves
// them on a user's machine.
func TestHelpersEndWithOwner(t *testing.T) {
	t.Parallel()
	owner := exec.Command("sleep", "3600") // stands in for the test binary
	require.NoError(t, owner.Start())
	t.Cleanup(func() {
		owner.Process.Kill()
		owner.Wait()
	})
	st, ok := startTime(owner.Process.Pid)
	require.True(t, ok, "start time of the owner")
	ownerEnv := EnvOwner + "=" + strconv.Itoa(owner.Process.Pid) + "." + strconv.FormatUint(st, 10)

	sp := sessionProtos[0]
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	r := startEnv(t, "", Script{Flavor: sp.flavor, SessionHelper: true, TurnSpawns: true, Grandchild: true, Escapee: true}, []string{ownerEnv}, pr, sp.args...)
	pr.Close()
	_, err = pw.WriteString(sp.turn(1) + "\n")
	require.NoError(t, err)
	for !sp.ends(r.next()) {
	}
	pw.Close() // the fake ends at EOF; its helpers sleep on
	r.finish()

	var helpers []Proc
	for _, p := range r.record().Procs {
		if p.Role != "agent" && p.Role != roleEscapee && p.Role != roleTurnDaemonStart && p.Role != roleTurnEnviStart {
			helpers = append(helpers, p)
		}
	}
	require.Len(t, helpers, 6, "sleeper, escaped, session helper, and the turn's grandchild and two daemons: %+v", helpers)
	for _, p := range helpers {
		require.True(t, alive(p), "%s %d ended while its owner runs", p.Role, p.Pid)
	}
	owner.Process.Kill()
	owner.Wait()
	deadline := time.Now().Add(testenv.Timeout(testenv.Hang))
	for _, p := range helpers {
		awaitExit(fmt.Sprintf("%d.%d", p.Pid, p.StartTime), time.Until(deadline))
		if alive(p) {
			t.Errorf("%s %d outlived its owner", p.Role, p.Pid)
		}
	}
}
