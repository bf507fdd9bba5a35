//go:build linux

package sandbox

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clinvoke/clinvoke/internal/ahead"
	"golang.org/x/sys/unix"
)

// The rules of a policy but its temporary directory's are the same from
// run to run while the filesystem they were read from is: Build records,
// with each set of rules it makes, every path it read and what it found
// there, keeps the record of the last few policies, and for a policy whose
// record still holds adds the recorded rules again (one landlock_add_rule
// each) instead of walking the filesystem and opening every path anew.
//
// A record holds, for each path opened, the open file (O_PATH) with its
// identity and the access its rule allowed; for each path that could not
// be opened, its name; for each directory listed (the directories above a
// hidden path, a Top), its entries' names and types. It holds when every
// recorded path leads to the same file as it did (the same device and
// inode, followed or not as the build did: the record keeps the file open,
// so its inode number cannot be another file's), every path missing is
// still missing, and every listing is the same. A fresh build then reads
// the same listings, opens the same files and allows them the same access:
// its rules are the record's. Anything else, and the record is dropped and
// the rules built fresh.
//
// The record is keyed by everything else the walk reads: the level, the
// hidden and visible paths as sight resolves them, the working directory
// and its held names, the writable paths and the Tops, the Landlock ABI
// and the effective user. The temporary directory is not in it (its rule is
// added to each run's ruleset on its own) unless it lies beneath a hidden
// path, where it changes the walk: such a policy is built fresh.
//
// A policy's first build records nothing, only that it was built: its
// record is made by its second build, and used from its third on. A
// program that builds each policy once (one run) holds no file after its
// run. A record not used by a build for recordIdle is dropped, and its
// files closed once no build uses it: a deleted file it holds frees its
// disk space, a mount beneath a path it holds can be unmounted.

// maxRecords is how many policies' records are kept, the most recently
// used first.
const maxRecords = 4

// recordIdle is how long a record outlives its last use by a build, as
// long as a kept TMPDIR outlives the last run.
const recordIdle = 30 * time.Second

// maxPinned bounds the files one record holds open: a working directory
// the run writes decides how many entries its top has, and a policy with
// more is built fresh each time rather than hold the host's descriptors.
const maxPinned = 512

// records are the kept records, the most recently used first.
var records = recordCache{idle: recordIdle, after: afterFunc}

// A stopper is a timer that can be stopped, as a *time.Timer.
type stopper interface{ Stop() bool }

// afterFunc is time.AfterFunc, returning a stopper.
func afterFunc(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }

// The records are dropped with the pools of internal/ahead: a test that
// counts the process's descriptors finds none released behind its back.
func init() { ahead.OnSettle(records.reset) }

// A ruleRecord is what one build read, and the files it opened, held open.
type ruleRecord struct {
	pinned  []pinnedPath
	missing []pathName
	lists   []listing
	ok      bool // every path opened was kept: the record is complete
}

// A pinnedPath is a path the build opened (followed unless nofollow), the
// file it found there, and the access its rule allowed (none: no rule).
type pinnedPath struct {
	pathName
	fd       int
	dev, ino uint64
	access   uint64
}

// A pathName is a path as the build opened it.
type pathName struct {
	path     string
	nofollow bool
}

// A listing is a directory's entries, names and types, as os.ReadDir
// returned them, or that it failed.
type listing struct {
	dir     string
	failed  bool
	entries []string
}

// newRecord returns an empty record, to be completed by a build.
func newRecord() *ruleRecord { return &ruleRecord{ok: true} }

// absent records that path could not be opened.
func (r *ruleRecord) absent(path string, nofollow bool) {
	if r != nil {
		r.missing = append(r.missing, pathName{path, nofollow})
	}
}

// listed records dir's listing, or that listing it failed.
func (r *ruleRecord) listed(dir string, entries []os.DirEntry, err error) {
	if r != nil {
		r.lists = append(r.lists, listing{dir: dir, failed: err != nil, entries: names(entries)})
	}
}

// names returns the names of entries, each with its type.
func names(entries []os.DirEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = strconv.FormatUint(uint64(e.Type()), 16) + "/" + e.Name()
	}
	return out
}

// pin keeps fd, open at path and allowed acc, in the record, and reports
// whether it did; the caller closes it if not.
func (r *ruleRecord) pin(path string, nofollow bool, fd int, acc uint64) bool {
	if len(r.pinned) >= maxPinned {
		r.ok = false
	}
	if !r.ok {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		r.ok = false
		return false
	}
	r.pinned = append(r.pinned, pinnedPath{pathName: pathName{path, nofollow}, fd: fd, dev: uint64(st.Dev), ino: st.Ino, access: acc})
	return true
}

// close closes the record's files.
func (r *ruleRecord) close() {
	for _, p := range r.pinned {
		unix.Close(p.fd)
	}
	r.pinned = nil
}

// holds reports whether the filesystem still reads as the record says.
func (r *ruleRecord) holds() bool {
	var st, fst unix.Stat_t
	for _, p := range r.pinned {
		if unix.Fstatat(unix.AT_FDCWD, p.path, &st, flagsOf(p.nofollow)) != nil || uint64(st.Dev) != p.dev || st.Ino != p.ino {
			return false
		}
		// The descriptor is still the file recorded (nothing in the
		// process closed it and got its number for another file).
		if unix.Fstat(p.fd, &fst) != nil || fst.Dev != st.Dev || fst.Ino != st.Ino || fst.Mode&unix.S_IFMT != st.Mode&unix.S_IFMT {
			return false
		}
	}
	for _, m := range r.missing {
		if err := unix.Fstatat(unix.AT_FDCWD, m.path, &st, flagsOf(m.nofollow)); err == nil {
			return false
		}
	}
	for _, l := range r.lists {
		entries, err := os.ReadDir(l.dir)
		if (err != nil) != l.failed || !slices.Equal(names(entries), l.entries) {
			return false
		}
	}
	return true
}

// flagsOf returns fstatat's flags for a path opened with O_NOFOLLOW or not.
func flagsOf(nofollow bool) int {
	if nofollow {
		return unix.AT_SYMLINK_NOFOLLOW
	}
	return 0
}

// apply adds the record's rules to b.
func (r *ruleRecord) apply(b *builder) error {
	for _, p := range r.pinned {
		if err := b.rule(p.fd, p.dev, p.ino, p.access); err != nil {
			return err
		}
	}
	b.reused = true
	return nil
}

// cached adds the rules of p to b from the record of an equal policy where
// one holds, else fresh, recording them for the next run where p was built
// before.
func (b *builder) cached(p Policy, abi int) error {
	hidden, visible := sight(p, false)
	key, ok := recordKey(p, abi, hidden)
	// The cgroup mounts split the walk as hidden paths do: a record is
	// for the mounts it was made under.
	key += "\x00" + strings.Join(b.cgroups, "\x00")
	if !ok {
		return b.policy(p, hidden, visible)
	}
	e := records.get(key)
	if e == nil {
		// The first build of p: it is recorded from the second on.
		records.put(&cachedRecord{key: key})
		return b.policy(p, hidden, visible)
	}
	if e.rec != nil {
		held := e.rec.holds()
		var err error
		if held {
			err = e.rec.apply(b)
		}
		records.release(e)
		if held && err == nil {
			return b.temp(p)
		}
		if err != nil {
			// The ruleset has some of the rules: not to be used.
			records.drop(e)
			return err
		}
	} else {
		records.release(e)
	}
	records.drop(e)
	b.rec = newRecord()
	err := b.fixed(p, hidden, visible)
	rec := b.rec
	b.rec = nil
	if err != nil || !rec.ok {
		rec.close()
		if err != nil {
			return err
		}
	} else {
		records.put(&cachedRecord{key: key, rec: rec})
	}
	return b.temp(p)
}

// recordKey returns the key of p's record, and false where p's rules
// cannot be recorded: its temporary directory lies beneath a hidden path.
// hidden are p's hidden paths as sight resolves them.
func recordKey(p Policy, abi int, hidden []string) (string, bool) {
	temps := []string{p.Temp}
	if len(hidden) > len(clean(p.Hidden)) {
		temps = resolved(temps)
	}
	for _, t := range clean(temps) {
		for _, h := range hidden {
			if under(t, h) || under(h, t) {
				return "", false
			}
		}
	}
	q := p
	q.Temp = ""
	_, visible := sight(q, false)
	// Each field is its count of strings, each string its length and
	// bytes: no two policies make the same key, whatever bytes their
	// paths hold.
	var k strings.Builder
	field := func(parts ...string) {
		k.WriteString(strconv.Itoa(len(parts)))
		k.WriteByte(';')
		for _, s := range parts {
			k.WriteString(strconv.Itoa(len(s)))
			k.WriteByte(':')
			k.WriteString(s)
		}
	}
	field(strconv.Itoa(int(p.Level)), strconv.Itoa(abi), strconv.Itoa(os.Geteuid()), p.Workdir)
	field(p.Held...)
	field(p.Writable...)
	field(hidden...)
	field(visible...)
	for _, t := range p.Tops {
		field(append([]string{t.Dir}, t.Held...)...)
	}
	return k.String(), true
}

// A cachedRecord is a kept record, with the builds using it; rec is nil
// where the policy was built once, unrecorded.
type cachedRecord struct {
	key     string
	rec     *ruleRecord
	users   int
	dropped bool
	uses    uint64  // counts the builds that used it (touch)
	timer   stopper // drops it once idle
}

// recordCache keeps the records of the last policies built, safe for
// concurrent builds: a record dropped while a build uses it is closed
// once the build is done with it.
type recordCache struct {
	mu      sync.Mutex
	entries []*cachedRecord // the most recently used first
	idle    time.Duration   // how long a record outlives its last use
	after   func(time.Duration, func()) stopper
	idled   func() // if not nil, called after each idle timer's function
}

// get returns the record of key, to be released, or nil.
func (c *recordCache) get(key string) *cachedRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.entries {
		if e.key == key {
			copy(c.entries[1:i+1], c.entries[:i])
			c.entries[0] = e
			e.users++
			c.touch(e)
			return e
		}
	}
	return nil
}

// touch, under c.mu, counts a use of e and sets its idle timer anew: a
// timer set before, even one whose function is about to run, finds the
// record used since and leaves it.
func (c *recordCache) touch(e *cachedRecord) {
	e.uses++
	if e.timer != nil {
		e.timer.Stop()
	}
	uses := e.uses
	e.timer = c.after(c.idle, func() { c.expire(e, uses) })
}

// expire, e's idle timer's function, drops e unless it was used since the
// timer was set (uses) or it was dropped already.
func (c *recordCache) expire(e *cachedRecord, uses uint64) {
	c.mu.Lock()
	if e.uses == uses && !e.dropped {
		c.remove(e)
	}
	idled := c.idled
	c.mu.Unlock()
	if idled != nil {
		idled()
	}
}

// release ends a build's use of e.
func (c *recordCache) release(e *cachedRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.users--
	if e.dropped && e.users == 0 {
		e.close()
	}
}

// drop removes e, which no longer holds.
func (c *recordCache) drop(e *cachedRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(e)
}

// put keeps e first, in place of a record of the same key, and drops the
// least recently used beyond maxRecords.
func (c *recordCache) put(e *cachedRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.entries {
		if o.key == e.key {
			c.remove(o)
			break
		}
	}
	c.entries = append([]*cachedRecord{e}, c.entries...)
	c.touch(e)
	for len(c.entries) > maxRecords {
		c.remove(c.entries[len(c.entries)-1])
	}
}

// remove drops e, stopping its idle timer and closing its record unless a
// build uses it; c.mu held.
func (c *recordCache) remove(e *cachedRecord) {
	if e.dropped {
		return
	}
	c.entries = slices.DeleteFunc(c.entries, func(o *cachedRecord) bool { return o == e })
	e.dropped = true
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	if e.users == 0 {
		e.close()
	}
}

// close closes e's record, if it has one.
func (e *cachedRecord) close() {
	if e.rec != nil {
		e.rec.close()
	}
}

// reset drops every record, and stops their idle timers.
func (c *recordCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.entries) > 0 {
		c.remove(c.entries[0])
	}
}
