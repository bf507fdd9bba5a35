package procstat

import "errors"

// Stat is /proc/PID/stat reduced to the fields the module reads. The
// numbers in the comments are those of proc(5).
type Stat struct {
	// State is the process's state (3): 'R', 'S', 'Z' (a zombie), ...
	State byte
	// PPID (4), Pgrp (5) and Session (6) are the parent, the process
	// group and the session.
	PPID, Pgrp, Session int
	// Flags are the kernel's flags of the process (9): PF_KTHREAD marks a
	// kernel thread.
	Flags uint64
	// CPU is utime+stime+cutime+cstime (14-17): the CPU time of the
	// process and of the children it reaped, in clock ticks.
	CPU uint64
	// Threads is the number of threads (20).
	Threads int
	// Start is the time the process started (22), in clock ticks after
	// boot; with the pid it names one process for its whole life.
	Start uint64
	// RSS is the resident set size (24), in pages; 0 on a line that
	// ends before it.
	RSS uint64
}

// ErrMalformed is the error of a line Parse cannot read.
var ErrMalformed = errors.New("procstat: malformed /proc/PID/stat")

// PFKthread is PF_KTHREAD in Stat.Flags.
const PFKthread = 0x00200000

// Parse parses a /proc/PID/stat line, which must run at least to the
// start time. The command name (2) is in parentheses and may itself hold
// spaces and parentheses, so the fields are counted from the last ')'.
// Fields the Stat does not hold are not checked. Parse does not allocate.
func Parse(b []byte) (Stat, error) {
	var s Stat
	for len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	i := lastIndex(b, ')')
	if i < 0 || i+3 >= len(b) || b[i+1] != ' ' {
		return Stat{}, ErrMalformed
	}
	f := b[i+2:]
	s.State = f[0]
	f = f[1:]
	// Fields after the state: 1 ppid, 2 pgrp, 3 session, 4 tty_nr,
	// 5 tpgid, 6 flags, ..., 11 utime, 12 stime, 13 cutime, 14 cstime,
	// ..., 17 num_threads, 19 starttime, 20 vsize, 21 rss.
	for k := 1; k <= 21; k++ {
		if k > 19 && blank(f) {
			break // a short line: no rss
		}
		if len(f) == 0 || f[0] != ' ' {
			return Stat{}, ErrMalformed
		}
		f = f[1:]
		j := index(f, ' ')
		if j < 0 {
			j = len(f)
		}
		tok := f[:j]
		f = f[j:]
		if k > 3 && k != 6 && (k < 11 || k > 14) && k != 17 && k != 19 && k != 21 {
			continue
		}
		v, ok := Decimal(tok)
		if !ok {
			return Stat{}, ErrMalformed
		}
		switch k {
		case 1:
			s.PPID = int(v)
		case 2:
			s.Pgrp = int(v)
		case 3:
			s.Session = int(v)
		case 6:
			s.Flags = v
		case 11, 12, 13, 14:
			s.CPU += v
		case 17:
			s.Threads = int(v)
		case 19:
			s.Start = v
		case 21:
			s.RSS = v
		}
	}
	return s, nil
}

// Comm returns the command name (2) of a /proc/PID/stat line: what lies
// between the first '(' and the last ')'.
func Comm(b []byte) ([]byte, bool) {
	i := lastIndex(b, ')')
	j := index(b, '(')
	if i < 0 || j < 0 || j > i {
		return nil, false
	}
	return b[j+1 : i], true
}

// Decimal parses b, digits only, as a decimal number without allocating.
func Decimal(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}

// index, lastIndex and blank are bytes.IndexByte, bytes.LastIndexByte and
// a test of bytes.TrimSpace's result, written out: package bytes imports
// unicode, whose initialiser would run before the shell shim's.
func index(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func lastIndex(b []byte, c byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// blank reports whether b holds only ASCII white space (all a stat line
// has).
func blank(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\v', '\f', '\r':
		default:
			return false
		}
	}
	return true
}
