//go:build linux

package shellshim

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestConstants: the numbers written out here are golang.org/x/sys/unix's.
func TestConstants(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"SYS_LANDLOCK_CREATE_RULESET", uint64(sysLandlockCreateRuleset), unix.SYS_LANDLOCK_CREATE_RULESET},
		{"SYS_LANDLOCK_RESTRICT_SELF", uint64(sysLandlockRestrictSelf), unix.SYS_LANDLOCK_RESTRICT_SELF},
		{"SYS_STATX", uint64(sysStatx), unix.SYS_STATX},
		{"LANDLOCK_CREATE_RULESET_VERSION", landlockCreateRulesetVersion, unix.LANDLOCK_CREATE_RULESET_VERSION},
		{"LANDLOCK_ACCESS_FS_MAKE_BLOCK", landlockAccessFSMakeBlock, unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK},
		{"LANDLOCK_SCOPE_SIGNAL", landlockScopeSignal, unix.LANDLOCK_SCOPE_SIGNAL},
		{"LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON", landlockLogNewExecOn, unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON},
		{"PR_SET_NO_NEW_PRIVS", prSetNoNewPrivs, unix.PR_SET_NO_NEW_PRIVS},
		{"STATX_MNT_ID", statxMntID, unix.STATX_MNT_ID},
		{"AT_SYMLINK_NOFOLLOW", atSymlinkNofollow, unix.AT_SYMLINK_NOFOLLOW},
		{"ST_RDONLY", stRdonly, unix.ST_RDONLY},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want unix's %#x", c.name, c.got, c.want)
		}
	}
	if atFDCWD != unix.AT_FDCWD {
		t.Errorf("AT_FDCWD = %d, want unix's %d", atFDCWD, unix.AT_FDCWD)
	}
}

// TestLayouts: the structures passed to the kernel are laid out as
// unix's, to the fields the shim sets or reads.
func TestLayouts(t *testing.T) {
	var a rulesetAttr
	var ua unix.LandlockRulesetAttr
	var s statx
	var us unix.Statx_t
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		// To scoped, ABI 6's last field: unix's has later ones, which the
		// kernel takes as unset when the size stops before them.
		{"sizeof landlock_ruleset_attr", unsafe.Sizeof(a), unsafe.Offsetof(ua.Scoped) + unsafe.Sizeof(ua.Scoped)},
		{"handled_access_fs", unsafe.Offsetof(a.handledAccessFS), unsafe.Offsetof(ua.Handled_access_fs)},
		{"handled_access_net", unsafe.Offsetof(a.handledAccessNet), unsafe.Offsetof(ua.Handled_access_net)},
		{"scoped", unsafe.Offsetof(a.scoped), unsafe.Offsetof(ua.Scoped)},
		{"sizeof statx", unsafe.Sizeof(s), unsafe.Sizeof(us)},
		{"stx_mask", unsafe.Offsetof(s.mask), unsafe.Offsetof(us.Mask)},
		{"stx_mnt_id", unsafe.Offsetof(s.mntID), unsafe.Offsetof(us.Mnt_id)},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want unix's %d", c.name, c.got, c.want)
		}
	}
}

// TestMountID: the mount ID statx gives here is unix's, and a missing
// path is the call's error.
func TestMountID(t *testing.T) {
	for _, path := range []string{"/", "/proc", "/tmp"} {
		var stx unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx); err != nil {
			t.Fatal(err)
		}
		if got, err := mountID(path); err != nil || got != stx.Mnt_id {
			t.Errorf("mountID(%s) = %d, %v, want %d", path, got, err, stx.Mnt_id)
		}
	}
	if _, err := mountID("/nonexistent/x"); unwrapErrno(err) != unix.ENOENT {
		t.Errorf("mountID of a missing path: %v, want ENOENT", err)
	}
}
