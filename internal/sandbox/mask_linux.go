package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// masks returns the paths of p.Masked that a mask is to cover, each
// resolved (a mount covers the file, not the name) and present, and
// p.Hidden with those the rules must hide instead: one with a Visible
// path beneath it, which a mask would cover too. One at or beneath a
// Visible path is shown, neither masked nor hidden.
func masks(p Policy) (masked, hidden []string) {
	hidden = p.Hidden
	_, visible := sight(Policy{Workdir: p.Workdir, Temp: p.Temp, Visible: p.Visible, Writable: p.Writable, Tops: p.Tops}, false)
	for _, m := range resolved(p.Masked) {
		if !lexists(m) || resolvesElsewhere(m) {
			continue // a link is masked by its target, listed after it
		}
		shown, beneath := false, false
		for _, v := range visible {
			shown = shown || under(m, v)
			beneath = beneath || (v != m && under(v, m))
		}
		switch {
		case shown:
		case beneath:
			hidden = append(hidden[:len(hidden):len(hidden)], m)
		default:
			masked = append(masked, m)
		}
	}
	return masked, hidden
}

// resolvesElsewhere reports whether path leads through a symbolic link.
func resolvesElsewhere(path string) bool {
	real, err := resolve(path)
	return err != nil || real != path
}

// A masker covers paths, in the calling thread's mount namespace, with
// one empty read-only file system made once for all its paths: a
// directory by a clone of its empty directory of mode 000, a file by a
// clone of its empty file of mode 000, each bound over it.
// Another user is refused either; root, whose capabilities pass a file's
// modes, finds it empty.
type masker struct {
	fs int // the detached tmpfs, or 0 before the first mask
}

// close releases the tmpfs; the masks made stay.
func (m *masker) close() {
	if m.fs > 0 {
		unix.Close(m.fs)
		m.fs = 0
	}
}

// mask covers path. The path is looked up once, no link followed, and
// the mount moved onto what was found, as hold does. It returns false,
// and no error, where path is gone.
func (m *masker) mask(path string) (bool, error) {
	at, err := openat2(unix.AT_FDCWD, path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, unix.RESOLVE_NO_SYMLINKS)
	if gone(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mask %s: open: %w", path, err)
	}
	defer unix.Close(at)
	var st unix.Stat_t
	if err := unix.Fstat(at, &st); err != nil {
		return false, fmt.Errorf("mask %s: stat: %w", path, err)
	}
	if m.fs == 0 {
		if m.fs, err = emptyFS(); err != nil {
			return false, fmt.Errorf("mask %s: %w", path, err)
		}
	}
	name := "file"
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		name = "dir"
	}
	src, err := unix.OpenTree(m.fs, name, unix.OPEN_TREE_CLONE|unix.O_CLOEXEC)
	if err != nil {
		return false, fmt.Errorf("mask %s: clone the empty file system: %w", path, err)
	}
	defer unix.Close(src)
	err = unix.MoveMount(src, "", at, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	if gone(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mask %s: %w", path, err)
	}
	return true, nil
}

// emptyFS returns a detached read-only tmpfs, no device, no set-id and no
// execution, holding an empty file "file" and an empty directory "dir",
// each of mode 000.
func emptyFS() (int, error) {
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen(tmpfs): %w", err)
	}
	defer unix.Close(fsfd)
	for _, kv := range [][2]string{{"mode", "000"}, {"size", "4k"}, {"nr_inodes", "3"}} {
		if err := unix.FsconfigSetString(fsfd, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("tmpfs %s=%s: %w", kv[0], kv[1], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("create the tmpfs: %w", err)
	}
	fd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsmount(tmpfs): %w", err)
	}
	f, err := unix.Openat(fd, "file", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(f)
		err = unix.Mkdirat(fd, "dir", 0)
	}
	if err == nil {
		err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("make the empty file system: %w", err)
	}
	return fd, nil
}
