//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Probe returns the Landlock ABI version of the running kernel, or an
// error wrapping ErrUnavailable that says what is missing and how to get
// it. It needs no privilege.
func Probe() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch {
	case errno == unix.ENOSYS:
		return 0, fmt.Errorf("%w: the kernel has no Landlock (Linux 5.13 or later, built with CONFIG_SECURITY_LANDLOCK)", ErrUnavailable)
	case errno == unix.EOPNOTSUPP:
		return 0, fmt.Errorf("%w: Landlock is built in but not enabled: add landlock to the kernel's lsm= boot parameter", ErrUnavailable)
	case errno != 0:
		return 0, fmt.Errorf("%w: Landlock: %w", ErrUnavailable, errno)
	}
	return int(v), nil
}

// A Ruleset is a built Landlock ruleset, to be applied to the thread that
// forks a run's root.
type Ruleset struct {
	fd int
	rt rights
	// cgroups are the cgroup file systems' mount points (cgroupMounts),
	// given read rights only whatever the level.
	cgroups []string

	private *privatePlan  // nil without private roots
	noPriv  string        // why there are none
	later   *Policy       // planned by PrivatePlan only: this process cannot make them
	chains  []chain       // with later, its settings files followed
	links   []Link        // the settings files that link into hidden paths
	held    []chain       // the held names of the working directory that are links
	applied []appliedRule // the rules added, in order: what tests compare of two builds
	reused  bool          // built from a cached record (rulecache_linux.go)
	ran     bool          // Restrict ran
	ns      *os.File      // the private roots' mount namespace, held (see Namespace)
}

// Restrict applies r to the calling OS thread, which must be locked to its
// goroutine and must never run other goroutines afterwards (retire it):
// the thread, and every process it forks from then on, stays under r.
// With Policy.Private it first gives the thread its private /tmp and
// /dev/shm; where the host refuses them, r holds without them (Private
// says why).
func (r *Ruleset) Restrict() error { return r.RestrictDropping() }

// RestrictDropping is Restrict, which drops EscapeCaps last, dropping
// caps in the same call (DropCaps): a thread that joined the run's
// network namespace drops its network capabilities with them.
func (r *Ruleset) RestrictDropping(caps ...int) error {
	r.ran = true
	// System V IPC and POSIX message queues of the run's own, gone with
	// its last process: a segment it leaves is not the host's, charged to
	// it after the run. It needs CAP_SYS_ADMIN; a user's thread without it
	// keeps the host's (a user's first stage makes them, UserNSAttr).
	if err := unix.Unshare(unix.CLONE_NEWIPC); err != nil && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("sandbox: unshare(CLONE_NEWIPC): %w", err)
	}
	if r.private != nil {
		if err := r.private.enter(&builder{fd: r.fd, rt: r.rt}); err != nil && len(r.private.Masked) > 0 {
			// The rules do not hide what the masks were to cover: the run
			// does not start without them.
			return fmt.Errorf("sandbox: the run's mount namespace, which masks the system's secrets: %w", err)
		} else if err != nil {
			r.noPriv = err.Error()
		} else if fd, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			r.ns = os.NewFile(uintptr(fd), "mnt-namespace")
		}
	}
	if err := restrictSelf(r.fd, r.rt.restrict); err != nil {
		return err
	}
	// Last, since the private roots' mounts needed CAP_SYS_ADMIN.
	return DropCaps(append(slices.Clone(EscapeCaps), caps...)...)
}

// restrictSelf applies the ruleset open at fd to the calling thread, after
// PR_SET_NO_NEW_PRIVS, with landlock_restrict_self's flags.
func restrictSelf(fd int, flags uintptr) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), flags, 0); errno != 0 {
		return fmt.Errorf("sandbox: landlock_restrict_self: %w", errno)
	}
	return nil
}

// Close releases the ruleset (a restricted thread keeps it).
// It also releases the private roots' namespace, unless Namespace took it.
func (r *Ruleset) Close() error {
	if r == nil || r.fd < 0 {
		return nil
	}
	if ns := r.Namespace(); ns != nil {
		ns.Close()
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// Namespace hands the caller, once Restrict has run, the mount namespace
// of the private roots (nil without): holding it keeps the namespace and
// its tmpfs mounts alive after the run's last process exits. Close it once
// the run's tree is gone: their teardown (some milliseconds, the unmounts
// waiting for an RCU grace period) then runs in the closing thread rather
// than on the exit of the run's last process, which the run waits for.
func (r *Ruleset) Namespace() *os.File {
	if r == nil {
		return nil
	}
	ns := r.ns
	r.ns = nil
	return ns
}

// rights are the access rights a ruleset handles, by kind of grant, for
// the kernel's ABI.
type rights struct {
	all   uint64 // every right handled: what a writable path gets
	read  uint64 // read, list, execute (and device ioctls)
	file  uint64 // the rights a rule on a file may carry
	scope uint64
	// restrict are landlock_restrict_self's flags: from ABI 7, the
	// denials of the programs the thread executes are logged (they are
	// not by default, only the thread's own before its execve), which a
	// host with audit enabled records and one without ignores.
	restrict uintptr
}

func rightsFor(abi int) rights {
	r := rights{
		read: unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR,
		all: unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
			unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
			unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
			unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
			unix.LANDLOCK_ACCESS_FS_MAKE_SYM,
		file: unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE,
	}
	if abi >= 2 {
		r.all |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r.all |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
		r.file |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r.all |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
		r.read |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
		r.file |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	if abi >= 6 {
		// A run's processes may signal one another, not the host nor
		// anything else outside the run.
		r.scope = unix.LANDLOCK_SCOPE_SIGNAL
	}
	if abi >= 7 {
		r.restrict = unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
	}
	return r
}

// devices are the device files every run may write: the null device and
// the terminals.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts"}

// Build makes the ruleset of p in the host, opening each path it names:
// a path it cannot open fails it, unless it is one the host may lack (a
// device, a Visible path). At every level, Unlimited without Hidden paths
// included, the cgroup file systems are read-only for the run: it cannot
// leave its cgroups nor lift their limits, root or not.
func Build(p Policy) (*Ruleset, error) {
	abi, err := Probe()
	if err != nil {
		return nil, err
	}
	rt := rightsFor(abi)
	attr := unix.LandlockRulesetAttr{Handled_access_fs: rt.all, Scoped: rt.scope}
	size := unsafe.Sizeof(attr)
	if abi < 6 {
		size = unsafe.Offsetof(attr.Scoped)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return nil, fmt.Errorf("sandbox: landlock_create_ruleset: %w", errno)
	}
	if p.Masked, p.Hidden = masks(p); len(p.Masked) > 0 && (!p.Private || privateProbe() != nil) {
		// No mount namespace for the run as root's route makes it (a
		// first stage's comes after the rules): the rules hide them.
		p.Hidden, p.Masked = append(slices.Clip(p.Hidden), p.Masked...), nil
	}
	r := &Ruleset{fd: int(fd), rt: rt}
	b := builder{fd: int(fd), rt: rt, cgroups: cgroupMounts()}
	if err := b.cached(p, abi); err != nil {
		r.Close()
		return nil, err
	}
	r.applied, r.reused = b.applied, b.reused
	chains := followSettings(p.Settings)
	r.links = hiddenLinks(p, chains)
	r.held = followHeld(p)
	chains = append(chains, r.held...)
	if p.Private {
		if err := privateProbe(); err != nil {
			// Restrict could not make them; a first stage in a user
			// namespace of its own may (PrivatePlan).
			r.noPriv, r.later, r.chains = err.Error(), &p, chains
			return r, nil
		}
	}
	r.private, r.noPriv = planPrivate(p, chains)
	if r.private == nil && len(p.Masked) > 0 {
		// No mount namespace after all: the rules hide them.
		r.Close()
		p.Hidden, p.Masked = append(slices.Clip(p.Hidden), p.Masked...), nil
		return Build(p)
	}
	return r, nil
}

// Private reports, once Restrict has run, whether the run got its private
// /tmp and /dev/shm, and if not, why.
func (r *Ruleset) Private() (bool, string) {
	switch {
	case r == nil:
		return false, "no ceiling"
	case r.private == nil || r.noPriv != "":
		return false, r.noPriv
	case !r.ran:
		return false, "the ruleset was applied by another process"
	}
	return true, ""
}

// Unheld returns, once Restrict ran, the links that settings files lead
// through (and the files they end at) and the held names below the top of
// the working directory that could not be held read-only, each with why,
// where the walk for those names stopped short or which mounts it did
// not enter, and why the shells are
// not bound where they could not be: each is left as it is, the other
// holds and the private roots stand. Without private roots (no mount namespace: Landlock alone) it
// names each held name of the working directory that is a symbolic link:
// its target keeps its own rules (a writable entry of the working
// directory, as a rule cannot be given by name), and only a mount holds
// it.
func (r *Ruleset) Unheld() []string {
	if r == nil {
		return nil
	}
	if r.private == nil {
		return unheldNames(r.held)
	}
	return r.private.skipped
}

// unheldNames returns, for each of held (held names followed), why the
// file it ends at is not held.
func unheldNames(held []chain) []string {
	var out []string
	for _, c := range held {
		end := c.paths[len(c.paths)-1]
		if real, err := filepath.EvalSymlinks(end); err == nil {
			end = real
		}
		out = append(out, fmt.Sprintf("%s is a symbolic link to %s, which the run writes wherever its rules allow (a writable entry of the working directory): without a mount namespace the sandbox cannot hold it read-only", c.paths[0], end))
	}
	return out
}

// builder adds a policy's rules to a ruleset.
type builder struct {
	fd int
	rt rights
	// cgroups are the cgroup file systems' mount points (cgroupMounts),
	// given read rights only whatever the level.
	cgroups []string

	rec     *ruleRecord   // where the paths it reads are recorded, or nil
	applied []appliedRule // the rules it added
	reused  bool          // it added a cached record's rules
}

// An appliedRule is one rule added to a ruleset: the file's identity and
// the access it was allowed.
type appliedRule struct {
	dev, ino, access uint64
}

// policy adds the rules of p to b: fixed's, and the run's temporary
// directory.
func (b *builder) policy(p Policy, hidden, visible []string) error {
	if err := b.fixed(p, hidden, visible); err != nil {
		return err
	}
	return b.temp(p)
}

// temp allows everything on p's temporary directory, below Unlimited: the
// one rule that differs from run to run.
func (b *builder) temp(p Policy) error {
	if p.Level == Unlimited {
		return nil
	}
	return b.add(p.Temp, b.rt.all, false)
}

// fixed adds the rules of p but its temporary directory's, with hidden and
// visible as sight finds them.
func (b *builder) fixed(p Policy, hidden, visible []string) error {
	if p.Level == Unlimited {
		// Writes everywhere reads are allowed.
		return b.reads(hidden, visible, b.rt.all)
	}
	if err := b.reads(hidden, visible, b.rt.read); err != nil {
		return err
	}
	for _, d := range devices {
		if err := b.add(d, b.rt.all, true); err != nil {
			return err
		}
	}
	for _, d := range p.Writable {
		if err := b.add(d, b.rt.all, true); err != nil {
			return err
		}
	}
	tops := p.Tops
	if p.Level == WorkspaceWrite {
		tops = append(tops, Top{Dir: p.Workdir, Held: p.Held})
	}
	for _, t := range tops {
		if err := b.top(t); err != nil {
			return err
		}
	}
	return nil
}

// top allows everything on each existing entry of t.Dir but the held
// names (a symbolic link is skipped: its target keeps its own rules).
func (b *builder) top(t Top) error {
	dirfd, err := unix.Open(t.Dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if os.IsNotExist(err) {
			b.rec.absent(t.Dir, false)
			return nil // nothing to allow; reads stay as they are
		}
		return fmt.Errorf("sandbox: %s: %w", t.Dir, err)
	}
	defer b.release(t.Dir, false, dirfd, 0)
	entries, err := os.ReadDir(t.Dir)
	if err != nil {
		return fmt.Errorf("sandbox: list %s: %w", t.Dir, err)
	}
	b.rec.listed(t.Dir, entries, nil)
	for _, e := range entries {
		n := e.Name()
		if isHeld(n, t.Held) {
			continue
		}
		path := filepath.Join(t.Dir, n)
		fd, err := unix.Openat(dirfd, n, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			b.rec.absent(path, true)
			continue // gone since the listing
		}
		acc, err := b.addFD(fd, b.rt.all)
		b.release(path, true, fd, acc)
		if err != nil {
			return fmt.Errorf("sandbox: %s: %w", path, err)
		}
	}
	return nil
}

// release closes fd, open at path (not followed if nofollow) and allowed
// acc, or hands it to the record being made.
func (b *builder) release(path string, nofollow bool, fd int, acc uint64) {
	if b.rec == nil || !b.rec.pin(path, nofollow, fd, acc) {
		unix.Close(fd)
	}
}

// isHeld reports whether name is one of held, as the judge compares names.
func isHeld(name string, held []string) bool {
	for _, h := range held {
		if name == h {
			return true
		}
	}
	return false
}

// reads allows access on the whole
// filesystem but hidden paths, where only the visible paths beneath them
// are allowed, and the cgroup mounts (b.cgroups), where only reading is.
// Only the directories that hold a hidden, visible or cgroup mount path
// are listed; they themselves get no right, so that nothing beneath them
// is allowed through them.
func (b *builder) reads(hidden, visible []string, acc uint64) error {
	var walk func(p string) error
	walk = func(p string) error {
		split := false
		for _, h := range hidden {
			if h != p && under(h, p) {
				split = true
			}
		}
		acc := acc
		for _, c := range b.cgroups {
			if c != p && under(c, p) {
				split = true
			}
			if under(p, c) {
				acc &= b.rt.read
			}
		}
		if darkAt(p, hidden, visible) {
			// Dark: only visible paths beneath it, each walked.
			for _, v := range visible {
				if v != p && under(v, p) && !covered(v, p, visible) {
					if err := walk(v); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if !split {
			return b.add(p, acc, true)
		}
		entries, err := os.ReadDir(p)
		b.rec.listed(p, entries, err)
		if err != nil {
			return nil // unreadable by the host: left out
		}
		for _, e := range entries {
			if e.Type()&os.ModeSymlink != 0 {
				continue
			}
			if err := walk(filepath.Join(p, e.Name())); err != nil {
				return err
			}
		}
		return nil
	}
	return walk("/")
}

// darkAt reports whether p is hidden: at or beneath a hidden path, with no
// visible path between that hidden path and p. A path both hidden and
// visible (a working directory that is the home directory) is visible.
func darkAt(p string, hidden, visible []string) bool {
	deepest := ""
	for _, h := range hidden {
		if under(p, h) && len(h) > len(deepest) {
			deepest = h
		}
	}
	if deepest == "" {
		return false
	}
	for _, v := range visible {
		if under(p, v) && len(v) >= len(deepest) {
			return false
		}
	}
	return true
}

// covered reports whether v is beneath another visible path that is
// itself beneath p (it is walked from there).
func covered(v, p string, visible []string) bool {
	for _, o := range visible {
		if o != v && o != p && under(o, p) && under(v, o) {
			return true
		}
	}
	return false
}

// add allows access on path; a missing path is an error unless optional.
func (b *builder) add(path string, access uint64, optional bool) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if optional {
			b.rec.absent(path, false)
			return nil
		}
		return fmt.Errorf("sandbox: %s: %w", path, err)
	}
	acc, err := b.addFD(fd, access)
	b.release(path, false, fd, acc)
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", path, err)
	}
	return nil
}

// addFD allows access on the file or directory open at fd, cut to the
// rights a file may carry when it is not a directory, and returns what it
// allowed (none on a symbolic link).
func (b *builder) addFD(fd int, access uint64) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFLNK:
		return 0, nil
	default:
		access &= b.rt.file
	}
	return access, b.rule(fd, uint64(st.Dev), st.Ino, access)
}

// rule adds the rule that allows access on the file open at fd, whose
// device and inode are dev and ino; none where access is none.
func (b *builder) rule(fd int, dev, ino, access uint64) error {
	if access == 0 {
		return nil
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(b.fd), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("landlock_add_rule: %w", errno)
	}
	b.applied = append(b.applied, appliedRule{dev: dev, ino: ino, access: access})
	return nil
}

// clean returns the non-empty paths of ps, cleaned and absolute.
func clean(ps []string) []string {
	var out []string
	for _, p := range ps {
		if p == "" {
			continue
		}
		if a, err := filepath.Abs(p); err == nil {
			out = append(out, filepath.Clean(a))
		}
	}
	return out
}
