//go:build linux

package shellshim

import (
	"runtime"
	"syscall"
	"unsafe"
)

// The Linux constants the shim needs, written out rather than taken from
// golang.org/x/sys/unix, whose initialisers would run before this
// package's (sys_linux_test.go compares them with unix's).
const (
	landlockCreateRulesetVersion = 1      // LANDLOCK_CREATE_RULESET_VERSION
	landlockAccessFSMakeBlock    = 0x800  // LANDLOCK_ACCESS_FS_MAKE_BLOCK
	landlockScopeSignal          = 0x2    // LANDLOCK_SCOPE_SIGNAL (ABI 6)
	landlockLogNewExecOn         = 0x2    // LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (ABI 7)
	prSetNoNewPrivs              = 38     // PR_SET_NO_NEW_PRIVS
	statxMntID                   = 0x1000 // STATX_MNT_ID
	atSymlinkNofollow            = 0x100  // AT_SYMLINK_NOFOLLOW
	stRdonly                     = 0x1    // ST_RDONLY
	atFDCWD                      = -100   // AT_FDCWD
)

// base is where the architecture's system call numbers start: the
// numbers added since Linux 5.1 are the same everywhere, after it.
func base() uintptr {
	switch runtime.GOARCH {
	case "mips", "mipsle":
		return 4000
	case "mips64", "mips64le":
		return 5000
	}
	return 0
}

// The Landlock system calls (Linux 5.13).
var (
	sysLandlockCreateRuleset = base() + 444
	sysLandlockRestrictSelf  = base() + 446
)

// sysStatx is statx(2)'s number, which predates the common numbering.
var sysStatx = func() uintptr {
	switch runtime.GOARCH {
	case "amd64":
		return 332
	case "386", "ppc", "ppc64", "ppc64le":
		return 383
	case "arm":
		return 397
	case "s390x":
		return 379
	case "sparc64":
		return 360
	case "mips", "mipsle":
		return 4366
	case "mips64", "mips64le":
		return 5326
	}
	return 291 // arm64, loong64, riscv64: the generic table
}()

// rulesetAttr is struct landlock_ruleset_attr.
type rulesetAttr struct {
	handledAccessFS  uint64
	handledAccessNet uint64
	scoped           uint64
}

// statx is struct statx, to its mount ID.
type statx struct {
	mask  uint32
	_     [0x90 - 4]byte
	mntID uint64
	_     [0x100 - 0x98]byte
}

// mountID returns the ID of the mount path is on (not following a final
// symbolic link).
func mountID(path string) (uint64, error) {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return 0, err
	}
	var stx statx
	cwd := atFDCWD
	_, _, errno := syscall.Syscall6(sysStatx, uintptr(cwd), uintptr(unsafe.Pointer(p)), atSymlinkNofollow, statxMntID, uintptr(unsafe.Pointer(&stx)), 0)
	if errno != 0 {
		return 0, &callError{"statx " + path, errno}
	}
	if stx.mask&statxMntID == 0 {
		return 0, &callError{"statx " + path + ": the kernel gave no mount ID (Linux 5.8 or later)", 0}
	}
	return stx.mntID, nil
}

// callError is a failed call: what was called, and its errno (none when
// the call succeeded but its answer was not enough).
type callError struct {
	call  string
	errno syscall.Errno
}

func (e *callError) Error() string {
	if e.errno == 0 {
		return e.call
	}
	return e.call + ": " + e.errno.Error()
}

func (e *callError) Unwrap() error {
	if e.errno == 0 {
		return nil
	}
	return e.errno
}
