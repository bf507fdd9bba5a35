//go:build linux

package shellshim

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/clinvoke/clinvoke/internal/procstat"
)

// Dir is where a run's mount namespace keeps its real shells, each at its
// own path beneath it (Dir + "/usr/bin/bash"): a read-only tmpfs of its
// own in the run's /tmp.
const Dir = "/tmp/.clinvoke-shells"

// FirstDir keeps the real shells a second time, for a shell whose parent
// it cannot inspect: the run's CLI itself started through a shell (a
// wrapper script), or a shell whose parent has gone. A shell beneath it
// never spares a command below it its own domain: the CLI may share it.
const FirstDir = Dir + "/first"

// dirs and names make the paths of the shells a CLI may run its commands
// through (Dirs, Names): the sandbox binds this program's binary over the ones that
// exist, resolved, that are themselves at such a path (IsShell).
// /usr/local/bin holds a bash installed by hand where the distribution's
// is old; ksh is often a link to ksh93 or mksh; busybox is where Alpine's
// /bin/sh leads, a multi-call binary: every applet started through one of
// its links then passes through the shim, which keeps argv[0], by which
// busybox picks the applet. Not here: the sbin directories (no shell lives
// there on the usual distributions), and shells no CLI runs its commands
// through (fish, csh, tcsh, nushell).
var (
	dirs  = []string{"/bin", "/usr/bin", "/usr/local/bin"}
	names = []string{"sh", "bash", "dash", "zsh", "ash", "ksh", "ksh93", "mksh", "busybox"}
)

// Dirs returns the directories a shell is shimmed in, a copy of its own.
func Dirs() []string { return append([]string(nil), dirs...) }

// Names returns the names a shell is shimmed by in each of Dirs, a copy of
// its own.
func Names() []string { return append([]string(nil), names...) }

// IsShell reports whether path (resolved, clean) is one of the paths a
// shell is shimmed at: a name of Names in a directory of Dirs.
func IsShell(path string) bool {
	i := len(path) - 1
	for i >= 0 && path[i] != '/' {
		i--
	}
	if i < 0 {
		return false
	}
	dir, name := path[:i], path[i+1:]
	if dir == "" {
		dir = "/"
	}
	return contains(dirs, dir) && contains(names, name)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// init runs the real shell in a nested domain when this binary was
// started through a shell's path in a run's mount namespace (shimmed). It
// never returns then.
func init() {
	if real, ok := shimmed(); ok {
		os.Exit(run(real))
	}
}

// deletedSuffix is what the kernel adds to the path of an executable
// whose file was removed.
const deletedSuffix = " (deleted)"

// shimmed returns the real shell this process must execute when it is
// this program's binary started through a shell's path (bound over it by
// the sandbox), and whether it is. It trusts nothing of the environment:
// only the path the kernel gives as this process's executable. Where the
// program's binary was removed or replaced on disk while the run goes on
// (an upgrade), the kernel names the one bound over a shell by the
// shell's path with deletedSuffix after it: that is still a shell's start,
// not the program's (whose main would otherwise run in the CLI's domain,
// with the command for arguments).
func shimmed() (string, bool) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return "", false
	}
	if n := len(exe) - len(deletedSuffix); n > 0 && exe[n:] == deletedSuffix {
		exe = exe[:n]
	}
	if !IsShell(exe) {
		return "", false
	}
	return Dir + exe, true
}

// arg0 is the name this process was started by, for its messages.
func arg0() string {
	if len(os.Args) == 0 {
		return ""
	}
	return os.Args[0]
}

// fail writes msg on standard error and returns the status a shell gives
// a command it cannot execute.
func fail(msg string) int {
	os.Stderr.WriteString("sandbox: " + msg + "\n")
	return 126
}

// run executes the real shell real, in a Landlock domain nested below the
// CLI's (a new one nested in the one it was started in, unless placed
// finds it in such a domain already: Landlock allows 16 layers), with
// this process's arguments and environment. It returns only on failure,
// with the status a shell gives a command it cannot execute (126), having
// said why on standard error: a command never runs unnested, and never as
// this program.
func run(real string) int {
	runtime.LockOSThread()
	if err := checkDir(); err != nil {
		return fail(arg0() + " is this program's binary: " + err.Error())
	}
	nested, first := placed()
	if first {
		real = FirstDir + real[len(Dir):]
	}
	if !nested {
		if err := Nest(); unwrapErrno(err) == syscall.E2BIG {
			return fail(arg0() + ": the command's own Landlock domain would be a 17th layer and Landlock allows 16 (the program itself runs under layers besides the run's): the command does not run in the CLI's domain instead: " + err.Error())
		} else if err != nil {
			return fail(arg0() + ": " + err.Error())
		}
	}
	err := syscall.Exec(real, os.Args, os.Environ())
	return fail("execute " + real + ": " + err.Error())
}

// unwrapErrno returns the errno err carries, or 0.
func unwrapErrno(err error) syscall.Errno {
	switch e := err.(type) {
	case *callError:
		return e.errno
	case syscall.Errno:
		return e
	}
	return 0
}

// placed tells how a shell is to start, from its parent: nested, when it
// is already in a domain nested below the CLI's, so that it needs no new
// layer; first, when its parent cannot be inspected (an enclosing domain:
// the CLI itself starts, or its parent has gone), so that it runs the
// real shell beneath FirstDir and a shell below it nests again.
//
// A shell is nested only when its parent, which it may inspect (a process
// of its own domain or of one nested in it) and which started no later
// than it (a pid reused is no parent), is a real shell beneath Dir but not
// beneath FirstDir. By induction such a shell's domain lies strictly below
// that of the nearest ancestor that is no shell: the shells between nested
// or were spared by a shell parent. A shell any other process started (the
// CLI, or a program of a command, such as make or xargs) nests again, even
// where a shell beneath Dir is further up: that shell may be a wrapper
// that started the CLI (a launcher, then a wrapper script, then the CLI),
// whose domain the CLI shares. Each program between two shells so costs a
// layer of Landlock's 16.
func placed() (nested, first bool) {
	self, err := procstat.Read(os.Getpid())
	if err != nil || self.PPID <= 1 {
		return false, false
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(self.PPID) + "/exe")
	if err != nil {
		return false, true
	}
	st, err := procstat.Read(self.PPID)
	if err != nil || st.Start > self.Start {
		return false, false
	}
	if hasPrefix(exe, FirstDir+"/") {
		return false, false
	}
	return hasPrefix(exe, Dir) && IsShell(exe[len(Dir):]), false
}

func hasPrefix(s, prefix string) bool {
	return len(s) >= len(prefix) && s[:len(prefix)] == prefix
}

// checkDir makes sure that Dir is what the sandbox mounted: a read-only
// mount of its own, not a directory of the host's /tmp.
func checkDir() error {
	dir, err := mountID(Dir)
	if err != nil {
		if ce, ok := err.(*callError); ok {
			return &callError{"no real shell beside it: " + ce.call, ce.errno}
		}
		return err
	}
	parent, err := mountID("/tmp")
	if err != nil {
		return err
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(Dir, &st); err != nil {
		return &callError{"statfs " + Dir, unwrapErrno(err)}
	}
	if dir == parent || int64(st.Flags)&stRdonly == 0 {
		return &callError{Dir + " is not the run's read-only mount of the real shells", 0}
	}
	return nil
}

// NestFlags returns what Nest's domain scopes and the flags it is
// restricted with at Landlock ABI abi: the run's own ruleset's
// (internal/sandbox's rights at that ABI, which a test compares), so that
// a command's domain scopes what the CLI's does and logs as it does.
func NestFlags(abi int) (scoped uint64, restrict uintptr) {
	if abi >= 6 {
		scoped = landlockScopeSignal
	}
	if abi >= 7 {
		restrict = landlockLogNewExecOn
	}
	return scoped, restrict
}

// Nest makes the calling thread's Landlock domain a new one nested in the
// one it is in: a ruleset that handles making block devices and allows it
// nowhere (no agent's command makes one, and only root may), after
// no_new_privs (which the run has already). Signals are scoped too (ABI
// 6): a command may signal its own domain's processes (its shell, what it
// started), not the CLI's, whose node would open its inspector on SIGUSR1.
// From ABI 7 the denials of the programs the thread executes are logged,
// as the run's own ruleset asks.
func Nest() error {
	v, _, errno := syscall.Syscall(sysLandlockCreateRuleset, 0, 0, landlockCreateRulesetVersion)
	if errno != 0 {
		return &callError{"Landlock is unavailable", errno}
	}
	scoped, restrict := NestFlags(int(v))
	attr := rulesetAttr{handledAccessFS: landlockAccessFSMakeBlock, scoped: scoped}
	size := unsafe.Sizeof(attr)
	if scoped == 0 {
		size = unsafe.Offsetof(attr.scoped) // the struct before ABI 6
	}
	fd, _, errno := syscall.Syscall(sysLandlockCreateRuleset, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return &callError{"landlock_create_ruleset", errno}
	}
	defer syscall.Close(int(fd))
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); errno != 0 {
		return &callError{"no_new_privs", errno}
	}
	if _, _, errno := syscall.Syscall(sysLandlockRestrictSelf, fd, restrict, 0); errno != 0 {
		return &callError{"landlock_restrict_self", errno}
	}
	return nil
}
