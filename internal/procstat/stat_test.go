package procstat

import (
	"errors"
	"testing"
)

// Parse reads the fields after the last ')' and refuses a line cut short
// or with something else than a number where it reads one.
func TestParse(t *testing.T) {
	for _, tt := range []struct {
		name, line string
		want       Stat
		err        bool
	}{
		{"plain", "42 (sleep) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 12345 1 2 3\n",
			Stat{State: 'S', PPID: 1, Pgrp: 42, Session: 42, Flags: 4194560, Threads: 1, Start: 12345, RSS: 2}, false},
		{"cpu times", "43 (node) R 1 43 43 0 -1 0 0 0 0 0 120 30 7 3 20 0 11 0 500 1000 2560 0\n",
			Stat{State: 'R', PPID: 1, Pgrp: 43, Session: 43, Threads: 11, CPU: 160, Start: 500, RSS: 2560}, false},
		{"kernel thread", "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 3 0 0 18446744073709551615",
			Stat{State: 'S', Flags: 2129984, Threads: 1, Start: 3}, false},
		{"spaces and parens in comm", "7 (a) b (c) d) Z 3 4 5 0 -1 0 0 0 0 0 0 0 0 0 -2 -20 1 0 99 0\n",
			Stat{State: 'Z', PPID: 3, Pgrp: 4, Session: 5, Threads: 1, Start: 99}, false},
		{"comm of ') ' and digits", "8 () 1 2 3) S 1 8 8 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
			Stat{State: 'S', PPID: 1, Pgrp: 8, Session: 8, Threads: 1, Start: 5}, false},
		{"ends at the start time", "9 (zl) Z 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 3 0 77\n",
			Stat{State: 'Z', PPID: 1, Pgrp: 9, Session: 9, Threads: 3, Start: 77}, false},
		{"truncated", "7 (x) S 1 2 3 0", Stat{}, true},
		{"truncated before the start time", "7 (x) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0", Stat{}, true},
		{"truncated in the name", "7 (x) y", Stat{}, true},
		{"no comm", "7 x S", Stat{}, true},
		{"empty", "", Stat{}, true},
		{"no field after the state", "7 (x) S", Stat{}, true},
		{"a letter for the parent", "7 (x) S x 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", Stat{}, true},
		{"a negative start time", "7 (x) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5", Stat{}, true},
		{"two spaces", "7 (x) S  1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", Stat{}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.line))
			if tt.err {
				if !errors.Is(err, ErrMalformed) {
					t.Errorf("Parse(%q) = %+v, %v; want ErrMalformed", tt.line, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Parse(%q) = %+v, %v; want %+v", tt.line, got, err, tt.want)
			}
		})
	}
}

// Comm is what lies between the first '(' and the last ')'.
func TestComm(t *testing.T) {
	for _, tt := range []struct {
		line, want string
		ok         bool
	}{
		{"42 (sleep) S 1", "sleep", true},
		{"7 (a) b (c) d) Z 3", "a) b (c) d", true},
		{"7 () S 1", "", true},
		{"7 x) (y S", "", false},
		{"7 x S", "", false},
	} {
		got, ok := Comm([]byte(tt.line))
		if string(got) != tt.want || ok != tt.ok {
			t.Errorf("Comm(%q) = %q, %v; want %q, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

// Parse of a whole line allocates nothing: the process scan of
// internal/proc reads every process with it.
func TestParseAllocs(t *testing.T) {
	line := []byte("43 (node) R 1 43 43 0 -1 0 0 0 0 0 120 30 7 3 20 0 11 0 500 1000 2560 0\n")
	if n := testing.AllocsPerRun(100, func() { Parse(line) }); n != 0 {
		t.Errorf("Parse allocates %v times, want 0", n)
	}
}
