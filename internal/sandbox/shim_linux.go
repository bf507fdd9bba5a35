//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/shellshim"
)

// The commands a CLI runs through a shell live in a Landlock domain
// nested in the CLI's. Under one domain a command, as the CLI's user,
// could read and write the CLI's memory (/proc/PID/mem, ptrace): read the
// secrets the CLI holds, or make the CLI itself do what the command may
// not. Landlock refuses a process of a nested domain the memory and
// ptrace of a process of the domain around it.
//
// So where the run has its private roots (a mount namespace of its own),
// the real shells are bound read-only beneath ShimDir, a small read-only
// tmpfs in the run's /tmp, and this program's own binary is bound
// read-only over each shell. A CLI that executes /bin/sh or /bin/bash
// starts this binary, whose internal/shellshim init recognises it by
// /proc/self/exe alone (a shell's path, which only the binds make this
// binary's; nothing of the environment), applies a ruleset that handles
// one right nobody's command needs (making block devices) and so makes a
// new domain nested in the CLI's, and executes the real shell with the
// same arguments (argv[0] kept) and environment. A shell a command's
// shell started is in a domain nested below the CLI's already and adds no
// layer; a shell any other process started nests again. That package imports os, syscall and internal/procstat only,
// so that its init runs before the initialisers of this package's
// imports, which a shell's start never needs.

// ShimDir is where a run's mount namespace keeps its real shells, each at
// its own path beneath it (ShimDir + "/usr/bin/bash").
const ShimDir = shellshim.Dir

// firstDir keeps the real shells a second time, for a shell whose parent
// it cannot inspect (shellshim.FirstDir).
const firstDir = shellshim.FirstDir

// shellPaths returns the shells of this host, each by its real path, once:
// the regular files the shells' paths lead to that are themselves at a
// shell's path (a shell reached through a link elsewhere is not shimmed).
func shellPaths() []string { return shellPathsIn(shellshim.Dirs(), shellshim.Names()) }

// shellPathsIn is shellPaths over the names given in the directories given.
// Each directory is opened once, and a directory that resolves where
// another of dirs did (/bin, a link to usr/bin) is not looked in again:
// its names lead where they led there. (A directory bound over another's
// path is not the same: the binds over its shells are its own.) Each name
// is then one openat from it, which follows the links and fails where
// nothing is (most names); a name found is resolved by what the kernel
// says its descriptor is open at (/proc/thread-self/fd), in one readlink
// where filepath.EvalSymlinks would lstat each element of the path and
// read each link on the way.
func shellPathsIn(dirs, names []string) []string {
	var out, seen []string
	for _, d := range dirs {
		dfd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		real, err := openedAt(dfd, d)
		if err != nil || slices.Contains(seen, real) {
			unix.Close(dfd)
			continue
		}
		seen = append(seen, real)
		for _, n := range names {
			real, ok := shellAt(dfd, d, n)
			if ok && !slices.Contains(out, real) {
				out = append(out, real)
			}
		}
		unix.Close(dfd)
	}
	return out
}

// openedAt returns the path the descriptor fd, opened at path, is open
// at: path with its links resolved.
func openedAt(fd int, path string) (string, error) {
	real, err := os.Readlink("/proc/thread-self/fd/" + strconv.Itoa(fd))
	if err != nil {
		// No /proc: resolve by the path, as the kernel did.
		return filepath.EvalSymlinks(path)
	}
	return real, nil
}

// shellAt returns the real path of the shell name in the directory open at
// dfd (dir), and whether there is one there: a regular file, at a shell's
// path itself (shellshim.IsShell) once its links are followed.
func shellAt(dfd int, dir, name string) (string, bool) {
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", false
	}
	real, err := openedAt(fd, filepath.Join(dir, name))
	return real, err == nil && shellshim.IsShell(real)
}

// shim is the shells' part of the private roots: each real shell cloned
// before the tmpfs covers /tmp, then kept beneath ShimDir, and this
// program's binary bound over it.
type shim struct {
	shells []string
	clones []int // each shell's clone, read-only
	exes   []int // a clone of this program's binary for each shell
}

// unnested says why the run's shells are not bound, in a run that keeps
// its private roots and holds: its commands share the CLI's domain.
func unnested(err error) string {
	return "the shells are not bound, so the commands the CLI runs share its Landlock domain and can read its memory: " + err.Error()
}

// shimFault, if not nil, is asked once the shells are cloned, before
// this program's binary is: a test makes binding the shells fail there.
var shimFault func() error

// cloneShells clones each shell of this host read-only, before anything
// is mounted over them. On error it returns a shim that binds nothing.
func cloneShells() (*shim, error) {
	s := &shim{}
	for _, sh := range shellPaths() {
		fd, err := readOnlyClone(unix.AT_FDCWD, sh, unix.AT_SYMLINK_NOFOLLOW)
		if gone(err) {
			continue
		}
		if err != nil {
			s.close()
			return &shim{}, err
		}
		s.shells, s.clones = append(s.shells, sh), append(s.clones, fd)
	}
	if len(s.shells) == 0 {
		return s, nil
	}
	if shimFault != nil {
		if err := shimFault(); err != nil {
			s.close()
			return &shim{}, err
		}
	}
	// The binary by its path: /proc/self/exe leads to the mount of the
	// host's namespace, which cannot be cloned from the run's (EINVAL).
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		s.close()
		return &shim{}, fmt.Errorf("this program's binary: %w", err)
	}
	for range s.shells {
		fd, err := readOnlyClone(unix.AT_FDCWD, exe, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil {
			err = sameFile(fd, "/proc/self/exe")
		}
		if err != nil {
			s.close()
			return &shim{}, fmt.Errorf("this program's binary (%s), to bind over the shells: %w", exe, err)
		}
		s.exes = append(s.exes, fd)
	}
	return s, nil
}

// sameFile checks that the file open at fd is the one at path: this
// program's binary, not a file since put at its path.
func sameFile(fd int, path string) error {
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		return err
	}
	if err := unix.Stat(path, &b); err != nil {
		return err
	}
	if a.Dev != b.Dev || a.Ino != b.Ino {
		return errors.New("the file at its path is another one now")
	}
	return nil
}

// readOnlyClone returns a read-only clone of the file at path (relative
// to dirfd), a detached mount ready to be moved.
func readOnlyClone(dirfd int, path string, flags uint) (int, error) {
	fd, err := unix.OpenTree(dirfd, path, unix.OPEN_TREE_CLONE|unix.O_CLOEXEC|flags)
	if err != nil {
		return -1, fmt.Errorf("clone %s: %w", path, err)
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("make the clone of %s read-only: %w", path, err)
	}
	return fd, nil
}

func (s *shim) close() {
	for _, fds := range [][]int{s.clones, s.exes} {
		for i, fd := range fds {
			if fd > 0 {
				unix.Close(fd)
				fds[i] = -1
			}
		}
	}
}

// mount keeps the real shells beneath ShimDir (in the run's own /tmp,
// mounted already) and binds this program's binary over each, appending
// each mount it made to mounted.
func (s *shim) mount(mounted *[]string) error {
	defer s.close()
	if len(s.shells) == 0 {
		return nil
	}
	if err := os.Mkdir(ShimDir, 0o755); err != nil {
		return fmt.Errorf("the real shells' directory: %w", err)
	}
	if err := unix.Mount("tmpfs", ShimDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount a tmpfs on %s: %w", ShimDir, err)
	}
	*mounted = append(*mounted, ShimDir)
	for i, sh := range s.shells {
		kept := ShimDir + sh
		if err := os.MkdirAll(filepath.Dir(kept), 0o755); err != nil {
			return fmt.Errorf("a place for the real %s: %w", sh, err)
		}
		if err := os.WriteFile(kept, nil, 0o755); err != nil {
			return fmt.Errorf("a place for the real %s: %w", sh, err)
		}
		if err := unix.MoveMount(s.clones[i], "", unix.AT_FDCWD, kept, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("keep the real %s at %s: %w", sh, kept, err)
		}
		unix.Close(s.clones[i])
		s.clones[i] = -1
		first := firstDir + sh
		if err := os.MkdirAll(filepath.Dir(first), 0o755); err != nil {
			return fmt.Errorf("a place for the real %s: %w", sh, err)
		}
		if err := os.WriteFile(first, nil, 0o755); err != nil {
			return fmt.Errorf("a place for the real %s: %w", sh, err)
		}
		if err := unix.Mount(kept, first, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("keep the real %s at %s: %w", sh, first, err)
		}
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, ShimDir, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("make %s read-only: %w", ShimDir, err)
	}
	for i, sh := range s.shells {
		err := unix.MoveMount(s.exes[i], "", unix.AT_FDCWD, sh, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(s.exes[i])
		s.exes[i] = -1
		if err != nil {
			return fmt.Errorf("bind this program over %s: %w", sh, err)
		}
		*mounted = append(*mounted, sh)
	}
	return nil
}
