package fakeagent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A Proc identifies one process of a fake agent's tree.
type Proc struct {
	Pid int
	// StartTime is the process's start time in clock ticks after boot
	// (field 22 of /proc/<pid>/stat) on Linux, 0 elsewhere. With Pid it
	// tells the process from a later one that reuses the pid.
	StartTime uint64
	// Role is "agent" for the fake itself; "sleeper" (Grandchild),
	// "holder" (HoldStdout), "escapee" (the setsid helper, which exits at
	// once) or "escaped" (its orphaned child) for helpers;
	// "session-helper" (SessionHelper) for the helper a session keeps;
	// and, for the processes a session's turn starts (TurnSpawns),
	// "turn-grandchild", "turn-daemon" (the setsid daemon),
	// "turn-envi-daemon" (the env -i daemon), and "turn-daemon-start" and
	// "turn-envi-start" for the processes that started the daemons and
	// exited at once.
	Role string
	// Turn is the number of the session turn that started the process
	// (1 for the first turn), or 0 for a process started by no turn.
	Turn int
}

// A Record is what a fake agent with Script.RecordDir saw.
type Record struct {
	// Args are the fake's arguments (os.Args[1:]).
	Args []string
	// Dir is its working directory.
	Dir string
	// Env is its whole environment.
	Env []string
	// StdinRead reports whether it read standard input to EOF.
	StdinRead bool
	// StdinLen and StdinSHA256 (hex) describe what it read.
	StdinLen    int64
	StdinSHA256 string
	// Procs are the fake and every helper process it started, in the
	// order they recorded themselves.
	Procs []Proc
	// Signals are the signals caught by helpers with
	// Script.GrandchildTraps, "SIGINT" or "SIGTERM", in the order they were
	// caught, by the helper's pid.
	Signals map[int][]string

	dir string
}

// ReadRecord reads the record a fake agent left in dir. Once the fake has
// printed its first event (or exited), the record holds its arguments and
// every process of its tree; the stdin fields are set once stdin is read,
// which happens before the first event unless Script.SkipStdin.
func ReadRecord(dir string) (*Record, error) {
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		return nil, fmt.Errorf("fakeagent: no record: %w", err)
	}
	var rf runFile
	if err := json.Unmarshal(b, &rf); err != nil {
		return nil, fmt.Errorf("fakeagent: bad record: %w", err)
	}
	r := &Record{
		Args: rf.Args, Dir: rf.Dir, Env: rf.Env, StdinRead: rf.StdinRead,
		StdinLen: rf.StdinLen, StdinSHA256: rf.StdinSHA256, dir: dir,
	}
	f, err := os.Open(filepath.Join(dir, "pids"))
	if err != nil {
		return nil, fmt.Errorf("fakeagent: no record: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 && len(fs) != 4 {
			continue
		}
		pid, err1 := strconv.Atoi(fs[0])
		st, err2 := strconv.ParseUint(fs[1], 10, 64)
		p := Proc{Pid: pid, StartTime: st, Role: fs[2]}
		var err3 error
		if len(fs) == 4 {
			p.Turn, err3 = strconv.Atoi(fs[3])
		}
		if err1 == nil && err2 == nil && err3 == nil {
			r.Procs = append(r.Procs, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return r, r.readSignals()
}

// readSignals reads the signals the helpers caught, if any did.
func (r *Record) readSignals() error {
	b, err := os.ReadFile(filepath.Join(r.dir, "signals"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fakeagent: bad record: %w", err)
	}
	r.Signals = make(map[int][]string)
	for l := range strings.Lines(string(b)) {
		if pid, name, ok := strings.Cut(strings.TrimSpace(l), " "); ok {
			if n, err := strconv.Atoi(pid); err == nil {
				r.Signals[n] = append(r.Signals[n], name)
			}
		}
	}
	return nil
}

// Getenv returns the value of key in the fake's environment.
func (r *Record) Getenv(key string) (string, bool) {
	for i := len(r.Env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(r.Env[i], key+"="); ok {
			return v, true
		}
	}
	return "", false
}

// Stdin returns what the fake read from standard input.
func (r *Record) Stdin() ([]byte, error) {
	if !r.StdinRead {
		return nil, fmt.Errorf("fakeagent: standard input was not read")
	}
	return os.ReadFile(filepath.Join(r.dir, "stdin"))
}

// Pid returns the pid of the first recorded process with role, or 0.
func (r *Record) Pid(role string) int {
	for _, p := range r.Procs {
		if p.Role == role {
			return p.Pid
		}
	}
	return 0
}

// Turn returns the recorded processes that turn n of a session started
// (TurnSpawns), in the order they recorded themselves.
func (r *Record) Turn(n int) []Proc {
	var ps []Proc
	for _, p := range r.Procs {
		if p.Turn == n && n > 0 {
			ps = append(ps, p)
		}
	}
	return ps
}

// Alive returns the pids of recorded processes still running: same pid
// and start time, zombies counting as dead (Linux, through /proc). On
// other Unix systems it probes pids with signal 0, which counts zombies
// and reused pids as alive; on Windows it reports none.
func (r *Record) Alive() []int {
	var pids []int
	for _, p := range r.Procs {
		if alive(p) {
			pids = append(pids, p.Pid)
		}
	}
	return pids
}

// Kill sends SIGKILL to every recorded process still running (checking the
// start time, so a reused pid is never hit) and waits up to a few seconds
// until they are gone. Tests use it in t.Cleanup so that a failing test
// leaves no sleeper behind; it is no substitute for asserting Alive.
func (r *Record) Kill() {
	killAll(r.Procs)
}

// Survivors returns the pids of live, non-zombie processes whose initial
// environment holds EnvTag=tag: the fake of a Script with that Tag and all
// its descendants, wherever they went (Linux; elsewhere none).
func Survivors(tag string) []int {
	return pids(withEnv(EnvTag + "=" + tag))
}

// Orphans returns the pids of live, non-zombie fake agents and helpers
// started (through Script.Env) by this process, whatever their tag: after
// m.Run in TestMain there should be none (Linux; elsewhere none). Fakes
// of other test binaries running at the same time are not included.
func Orphans() []int {
	return pids(withEnv(EnvOwner + "=" + ownerID()))
}

// TestingM is the part of *testing.M that CheckOrphans needs; it is also
// the interface goleak.VerifyTestMain takes.
type TestingM interface{ Run() int }

// CheckOrphans wraps m so that Run, after running the tests, waits up to
// two seconds for every fake agent of this process to be gone, and
// otherwise reports the survivors on stderr, kills them and returns a
// failing status:
//
//	func TestMain(m *testing.M) {
//		fakeagent.Main()
//		goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
//	}
//
// (without goleak: os.Exit(fakeagent.CheckOrphans(m).Run())).
func CheckOrphans(m TestingM) TestingM { return orphanCheck{m} }

type orphanCheck struct{ m TestingM }

func (o orphanCheck) Run() int {
	code := o.m.Run()
	entry := EnvOwner + "=" + ownerID()
	left := withEnv(entry)
	for deadline := time.Now().Add(2 * time.Second); len(left) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		left = withEnv(entry)
	}
	if len(left) == 0 {
		return code
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "fakeagent: %d fake agent process(es) survived the tests (now killed):", len(left))
	for _, p := range left {
		b.WriteString(" " + strconv.Itoa(p.Pid))
	}
	fmt.Fprintln(os.Stderr, b.String())
	killAll(left)
	if code == 0 {
		code = 1
	}
	return code
}

// killAll sends SIGKILL to each live process of ps and waits up to 5 s for
// them to be gone.
func killAll(ps []Proc) {
	for _, p := range ps {
		kill(p)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		n := 0
		for _, p := range ps {
			if alive(p) {
				n++
			}
		}
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill sends SIGKILL to p if it is still the recorded process. On Linux
// os.FindProcess holds a pidfd, so checking the start time after it and
// then killing through it cannot hit a process that reused the pid.
func kill(p Proc) {
	proc, err := os.FindProcess(p.Pid)
	if err != nil {
		return
	}
	defer proc.Release()
	if alive(p) {
		proc.Kill()
	}
}

func pids(ps []Proc) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.Pid)
	}
	return out
}
