//go:build linux

package proc

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/procstat"
)

// procInfo is /proc/<pid>/stat reduced to what Kill and the sampled
// accounting need.
type procInfo struct {
	pid, ppid, pgrp, sid int32
	start                uint64 // starttime: clock ticks after boot
	state                byte
	threads              int32
	kthread              bool // a kernel thread: no environment, never a member
	// cpu is utime+stime+cutime+cstime: the CPU time of the process and
	// of the children it reaped, in clock ticks.
	cpu uint64
	rss uint64 // resident set size, in pages (0 if the line ends before it)
}

// zombie reports whether the process has exited (it is gone for Kill). A
// process whose main thread exited while other threads run also shows state
// Z (ps shows "Zl"), but it is alive: a true zombie has one thread left.
func (p *procInfo) zombie() bool { return (p.state == 'Z' || p.state == 'X') && p.threads <= 1 }

// parseStat parses the fields of /proc/<pid>/stat that Kill needs
// (procstat.Parse, which allocates nothing).
func parseStat(pid int32, b []byte) (procInfo, error) {
	s, err := procstat.Parse(b)
	if err != nil {
		return procInfo{pid: pid}, err
	}
	return procInfo{pid: pid, ppid: int32(s.PPID), pgrp: int32(s.Pgrp), sid: int32(s.Session),
		start: s.Start, state: s.State, threads: int32(s.Threads), kthread: s.Flags&procstat.PFKthread != 0,
		cpu: s.CPU, rss: s.RSS}, nil
}

// procReader reads files under /proc/<pid>/ with fixed buffers, so that a
// scan of every process allocates nothing per process.
type procReader struct {
	path [40]byte
	buf  [1024]byte
}

// open opens /proc/<pid>/<name> with openat(2) on a NUL-terminated path
// built in r.path (unix.Openat would allocate the path on each call).
func (r *procReader) open(pid int32, name string) (int, error) {
	b := append(r.path[:0], "/proc/"...)
	b = strconv.AppendInt(b, int64(pid), 10)
	b = append(b, '/')
	b = append(b, name...)
	b = append(b, 0)
	cwd := unix.AT_FDCWD // a variable: the negative constant does not convert to uintptr
	fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, uintptr(cwd),
		uintptr(unsafe.Pointer(&b[0])), unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// stat reads /proc/<pid>/stat. One read returns the whole line, and the
// fields Kill needs lie well within the buffer.
func (r *procReader) stat(pid int32) (procInfo, error) {
	fd, err := r.open(pid, "stat")
	if err != nil {
		return procInfo{}, err
	}
	n, err := unix.Read(fd, r.buf[:])
	unix.Close(fd)
	if err != nil {
		return procInfo{}, err
	}
	return parseStat(pid, r.buf[:n])
}

// readStat reads one process's stat outside a scan.
func readStat(pid int32) (procInfo, error) {
	var r procReader
	return r.stat(pid)
}

// A snapshot is one pass over /proc, shared by every Kill that asked for
// it. It is never modified after the scan that made it.
//
// It holds every process started at or after the batch's freshFrom, read
// during the scan; older processes may be left out (see scanner.old),
// which is why a Tree looks in it only for processes started at or after
// its root: every process of a tree is.
type snapshot struct {
	seq    uint64             // snapshots are numbered in the order they started (snapSeq)
	procs  []procInfo         // sorted by pid
	kids   []int32            // indices into procs, sorted by ppid
	marked map[string][]int32 // marker → pids whose environment holds it
	// unsure says that some environment could not be read (its read
	// blocked, failed or came back empty): a later scan may find a
	// marker this one did not.
	unsure bool
}

// sortSnapshot sorts s.procs by pid and builds s.kids.
func sortSnapshot(s *snapshot) {
	byPid := func(a, b procInfo) int { return cmp.Compare(a.pid, b.pid) }
	if !slices.IsSortedFunc(s.procs, byPid) {
		slices.SortFunc(s.procs, byPid)
	}
	s.kids = make([]int32, len(s.procs))
	for i := range s.kids {
		s.kids[i] = int32(i)
	}
	slices.SortFunc(s.kids, func(a, b int32) int { return cmp.Compare(s.procs[a].ppid, s.procs[b].ppid) })
}

// find returns the index of pid in s.procs.
func (s *snapshot) find(pid int32) (int, bool) {
	return slices.BinarySearchFunc(s.procs, pid, func(p procInfo, pid int32) int { return cmp.Compare(p.pid, pid) })
}

// children returns the indices of the processes whose parent is ppid.
func (s *snapshot) children(ppid int32) []int32 {
	lo, _ := slices.BinarySearchFunc(s.kids, ppid, func(i, ppid int32) int { return cmp.Compare(s.procs[i].ppid, ppid) })
	hi := lo
	for hi < len(s.kids) && s.procs[s.kids[hi]].ppid == ppid {
		hi++
	}
	return s.kids[lo:hi]
}

// A scanner runs the scans of /proc for every Tree in the process.
//
// A scan reads the stat of every process, so concurrent Kills (a thousand
// runs cancelled together) would each pay O(all processes) and slow each
// other down. Instead requests coalesce: a caller joins the next batch, and
// the first caller to find no scan running runs the batch's scan for all of
// its members. Every member thus gets a scan that started after it asked,
// which is all Kill needs to see processes forked before it asked.
//
// Reading a process's stat costs three system calls, and a host usually
// has far more processes than its trees. So a scan skips the processes it
// has seen before that started before every tree in the batch: getdents
// returns each /proc/<pid> entry's inode number, and procfs gives a new
// process a new inode (the old one's dentries are flushed when it is
// reaped), so an unchanged (pid, inode) pair is the same process, whose
// start time has not changed. Such a process can be no tree's member, and
// a scan that finds nothing new costs a few getdents calls.
//
// The host's scanner (theScanner) is package state, shared on purpose: it
// owns nothing a caller can configure, only the coordination between Trees
// and a cache. It also runs the tracker of the Trees it scans for (see
// members_linux.go). A test makes a scanner of its own with newScanner,
// with hooks, for the trees it starts (see hooks).
type scanner struct {
	// hooks are a test's; the host's scanner has none.
	hooks   scanHooks
	tracker tracker

	mu      sync.Mutex
	cond    sync.Cond // broadcast when a scan ends
	running bool
	since   time.Time  // when the running scan started
	cur     *scanBatch // the running scan's batch
	next    *scanBatch
	markers map[string]int // registered markers → Trees using them; copied on write
	gen     uint64         // incremented when a marker is registered

	// Used only by the goroutine running a scan (running == true).
	envCache map[procKey]envResult
	envReads map[procKey]*envRead // environ reads that outlasted envTimeout
	// envTimeout bounds how long a scan waits for one process's
	// environment: the read can block on a hung mount (see readMarker).
	envTimeout time.Duration
	envTimer   *time.Timer
	old        []oldProc // processes seen by the last scan, sorted by pid
	dents      []byte
	r          procReader
	host       int32
}

// snapSeq numbers snapshots, scans and walks alike, in the order they
// started (see treeSys.memberSet).
var snapSeq atomic.Uint64

// procKey names a process across pid reuse.
type procKey struct {
	pid   int32
	start uint64
}

// envResult caches which registered marker a process's environment holds.
// An empty marker is only trusted for the registry generation it was read
// under: a marker registered later may be in it.
type envResult struct {
	marker string
	gen    uint64
}

// oldProc is what a scan remembers of a process for the next one.
type oldProc struct {
	pid   int32
	ino   uint64 // inode number of /proc/<pid>; 0 if unknown
	start uint64
}

// A dirent is a numeric entry of /proc.
type dirent struct {
	pid int32
	ino uint64
}

type scanBatch struct {
	minStart  uint64        // read environments of processes started at or after
	freshFrom uint64        // read the stat of every process started at or after
	asked     bool          // someone joined the batch
	done      chan struct{} // closed when snap and err are set
	snap      *snapshot
	err       error
}

// theScanner is the host's scanner, shared by all its Trees.
var theScanner = sync.OnceValue(func() *scanner { return newScanner(scanHooks{}) })

// scanHooks let a test watch and steer the scans of a scanner of its own.
// A nil field does nothing.
type scanHooks struct {
	// scan is called at the start of every scan, before anything is
	// read; the scan fails with the error it returns (tests make scans
	// slow, hang or fail, as a blocked or failed read of /proc would).
	scan func() error
	// joined is called when joinAfter hands a caller the running scan
	// (tests learn that a caller waits on it).
	joined func()
	// environ is called before each environ read, in the read's
	// goroutine (tests make reads hang, as on a hung mount).
	environ func(pid int32)
}

// newScanner returns a scanner with hooks h: the host's (theScanner), or
// a test's own.
func newScanner(h scanHooks) *scanner {
	s := &scanner{
		hooks:    h,
		next:     newBatch(),
		markers:  map[string]int{},
		envCache: map[procKey]envResult{},
		envReads: map[procKey]*envRead{},
		dents:    make([]byte, 8192),
		host:     int32(os.Getpid()),

		envTimeout: 100 * time.Millisecond,
	}
	s.cond.L = &s.mu
	return s
}

func newBatch() *scanBatch {
	return &scanBatch{minStart: math.MaxUint64, freshFrom: math.MaxUint64, done: make(chan struct{})}
}

// register adds a marker that scans look for in environments.
func (s *scanner) register(marker string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int, len(s.markers)+1)
	for k, v := range s.markers {
		m[k] = v
	}
	m[marker]++
	s.markers = m
	s.gen++
}

// unregister removes a marker added by register.
func (s *scanner) unregister(marker string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int, len(s.markers))
	for k, v := range s.markers {
		m[k] = v
	}
	if m[marker]--; m[marker] <= 0 {
		delete(m, marker)
	}
	s.markers = m
}

// scan returns a snapshot of every process, taken by a scan that started
// after the call. Environments are read for processes started at or after
// minStart (math.MaxUint64: none needed by this caller).
func (s *scanner) scan(minStart uint64) (*snapshot, error) {
	return s.scanSince(minStart, 0)
}

// scanSince is scan for a Tree whose root started at freshFrom (clock
// ticks after boot): the snapshot holds at least the processes started at
// or after freshFrom, and may leave older ones out.
func (s *scanner) scanSince(minStart, freshFrom uint64) (*snapshot, error) {
	b, _ := s.join(minStart, freshFrom, defaultTuning.killTimeout)
	<-b.done
	return b.snap, b.err
}

// join adds a request to the next batch and returns it; its done channel
// is closed when its scan has ended. If no scan is running, it starts the
// batch's scan in a goroutine of its own, so a caller that stops waiting
// leaves nothing behind but that scan, whoever else joins. wedged says
// that the running scan has been running longer than wedgeAfter (the
// caller's Kill bound: an environ or stat read blocked in the kernel): the
// batch will not be scanned before it ends.
func (s *scanner) join(minStart, freshFrom uint64, wedgeAfter time.Duration) (b *scanBatch, wedged bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b = s.next
	b.minStart = min(b.minStart, minStart)
	b.freshFrom = min(b.freshFrom, freshFrom)
	b.asked = true
	if !s.running {
		s.startLocked()
	}
	return b, s.running && s.next == b && time.Since(s.since) > wedgeAfter
}

// joinAfter is join for a caller that needs only a scan started at or
// after after: the running scan serves it if it started then and reads at
// least what the caller needs (the stat of every process started at or
// after freshFrom, environments from minStart on: its markers are those
// registered when it started, so the caller's marker must have been
// registered before after). A zero after is join.
func (s *scanner) joinAfter(after time.Time, minStart, freshFrom uint64, wedgeAfter time.Duration) (b *scanBatch, wedged bool) {
	if !after.IsZero() {
		s.mu.Lock()
		c := s.cur
		ok := c != nil && !s.since.Before(after) && time.Since(s.since) <= wedgeAfter &&
			c.freshFrom <= freshFrom && c.minStart <= minStart
		s.mu.Unlock()
		if ok {
			if s.hooks.joined != nil {
				s.hooks.joined()
			}
			return c, false
		}
	}
	return s.join(minStart, freshFrom, wedgeAfter)
}

// startLocked starts the next batch's scan. s.mu is held.
func (s *scanner) startLocked() {
	b := s.next
	s.next = newBatch()
	s.running = true
	s.since = time.Now()
	s.cur = b
	markers, gen := s.markers, s.gen
	go func() {
		snap, err := s.run(b.minStart, b.freshFrom, markers, gen)
		s.mu.Lock()
		defer s.mu.Unlock()
		b.snap, b.err = snap, err
		close(b.done)
		s.running = false
		s.cur = nil
		s.cond.Broadcast()
		if s.next.asked {
			s.startLocked()
		}
	}()
}

// run performs one scan. Only one runs at a time.
func (s *scanner) run(minStart, freshFrom uint64, markers map[string]int, gen uint64) (*snapshot, error) {
	if s.hooks.scan != nil {
		if err := s.hooks.scan(); err != nil {
			return nil, err
		}
	}
	seq := snapSeq.Add(1) // before the listing: what it sees is at least this new
	ents, err := s.pids()
	if err != nil {
		return nil, err
	}
	sn := &snapshot{seq: seq}
	old := make([]oldProc, 0, len(ents))
	for _, e := range ents {
		if e.ino != 0 {
			if i, ok := slices.BinarySearchFunc(s.old, e.pid, func(o oldProc, pid int32) int { return cmp.Compare(o.pid, pid) }); ok {
				if o := s.old[i]; o.ino == e.ino && o.start < freshFrom {
					old = append(old, o) // the same process as before, older than every tree asking
					continue
				}
			}
		}
		p, err := s.r.stat(e.pid)
		if gone(err) {
			continue // exited since the directory was read
		}
		if err != nil {
			// Not a sign that the process is gone (EMFILE, say): a
			// snapshot without it would make Kill think it is.
			return nil, fmt.Errorf("proc: read /proc/%d/stat: %w", e.pid, err)
		}
		old = append(old, oldProc{pid: e.pid, ino: e.ino, start: p.start})
		sn.procs = append(sn.procs, p)
	}
	if !slices.IsSortedFunc(old, func(a, b oldProc) int { return cmp.Compare(a.pid, b.pid) }) {
		slices.SortFunc(old, func(a, b oldProc) int { return cmp.Compare(a.pid, b.pid) })
	}
	s.old = old
	sortSnapshot(sn)

	if len(markers) == 0 || minStart == math.MaxUint64 {
		return sn, nil
	}
	for i := range sn.procs {
		p := &sn.procs[i]
		if p.start < minStart || p.zombie() || p.kthread || p.pid == s.host {
			continue
		}
		key := procKey{p.pid, p.start}
		res, ok := s.envCache[key]
		if !ok || (res.marker == "" && res.gen != gen) {
			r := s.readMarker(key, markers, gen)
			if r == nil {
				sn.unsure = true
				continue // its read is blocked: unreadable for now
			}
			res = envResult{r.marker, r.gen}
			if r.sure {
				s.envCache[key] = res
			} else if r.marker == "" {
				sn.unsure = true
			}
		}
		if res.marker != "" {
			if sn.marked == nil {
				sn.marked = map[string][]int32{}
			}
			sn.marked[res.marker] = append(sn.marked[res.marker], p.pid)
		}
	}
	for k := range s.envCache {
		if i, ok := sn.find(k.pid); !ok || sn.procs[i].start != k.start {
			delete(s.envCache, k)
		}
	}
	for k := range s.envReads {
		if i, ok := sn.find(k.pid); !ok || sn.procs[i].start != k.start {
			delete(s.envReads, k) // its goroutine ends with its read
		}
	}
	return sn, nil
}

// pids lists the numeric entries of /proc, with their inode numbers, with
// getdents(2), parsing the names in place.
func (s *scanner) pids() ([]dirent, error) {
	fd, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	pids := make([]dirent, 0, 512)
	for {
		n, err := unix.Getdents(fd, s.dents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return pids, nil
		}
		// struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name.
		for b := s.dents[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				break
			}
			name := b[19:reclen]
			if j := bytes.IndexByte(name, 0); j >= 0 {
				name = name[:j]
			}
			if v, ok := procstat.Decimal(name); ok && v > 0 && v <= math.MaxInt32 {
				pids = append(pids, dirent{pid: int32(v), ino: binary.NativeEndian.Uint64(b[0:8])})
			}
			b = b[reclen:]
		}
	}
}

// An envRead is one read of a process's environment, in a goroutine of
// its own.
type envRead struct {
	done   chan struct{} // closed when the fields below are set
	marker string
	sure   bool
	gen    uint64 // the registry generation it was read under
}

// envReaders holds the buffers of environ reads: a read that a scan stopped
// waiting for still owns its buffer until the read ends.
var envReaders = sync.Pool{New: func() any { return new(envReader) }}

type envReader struct {
	r   procReader
	buf []byte
}

// readMarker returns the read of key's environment, or nil if it has not
// ended within envTimeout. Reading /proc/<pid>/environ takes the
// target's mmap lock and can block for as long as the process is stuck (on
// a hung FUSE or NFS mount, say), so the read runs in a goroutine of its
// own and the scan goes on without it: the process counts as unmarked
// until a later scan finds the read ended. That costs one goroutine per
// blocked process, which ends when the read does; no scan waits for it
// again.
func (s *scanner) readMarker(key procKey, markers map[string]int, gen uint64) *envRead {
	r := s.envReads[key]
	if r == nil {
		r = &envRead{done: make(chan struct{}), gen: gen}
		go func() {
			if s.hooks.environ != nil {
				s.hooks.environ(key.pid)
			}
			e := envReaders.Get().(*envReader)
			r.marker, r.sure = e.readMarker(key.pid, markers)
			envReaders.Put(e)
			close(r.done)
		}()
		if s.envTimer == nil {
			s.envTimer = time.NewTimer(s.envTimeout)
		} else {
			s.envTimer.Reset(s.envTimeout)
		}
		select {
		case <-r.done:
			s.envTimer.Stop()
			return r
		case <-s.envTimer.C:
			s.envReads[key] = r
			return nil
		}
	}
	select {
	case <-r.done:
		delete(s.envReads, key)
		return r
	default:
		return nil
	}
}

// readMarker returns the registered marker found in /proc/<pid>/environ,
// or "", and whether the answer may be cached for the process. An empty
// read or an error is no answer: a process in the middle of execve has no
// environment yet (the kernel returns 0 bytes until the new one is set up),
// and one whose environ cannot be opened now may be readable later, so
// caching "no marker" for its (pid, starttime) would hide it from every
// later scan.
func (s *envReader) readMarker(pid int32, markers map[string]int) (marker string, sure bool) {
	fd, err := s.r.open(pid, "environ")
	if err != nil {
		return "", false
	}
	defer unix.Close(fd)
	if s.buf == nil {
		s.buf = make([]byte, 16<<10)
	}
	n := 0
	sure = true
	for {
		if n == len(s.buf) {
			s.buf = slices.Grow(s.buf, len(s.buf))[:2*len(s.buf)]
		}
		m, err := unix.Read(fd, s.buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			sure = false
		}
		if err != nil || m <= 0 {
			break
		}
		n += m
	}
	if n == 0 {
		sure = false
	}
	for env := s.buf[:n]; len(env) > 0; {
		e := env
		if j := bytes.IndexByte(env, 0); j >= 0 {
			e, env = env[:j], env[j+1:]
		} else {
			env = nil
		}
		if _, ok := markers[string(e)]; ok {
			return string(e), true
		}
	}
	return "", sure
}
