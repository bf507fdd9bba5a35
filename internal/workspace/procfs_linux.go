package workspace

import "golang.org/x/sys/unix"

// inProcFS reports whether dir, a directory that holds a symbolic link,
// is on a proc file system, whose links lead where the process they name
// sees them (a descriptor, a working directory, a root) and /proc/self
// to the process that reads it.
func inProcFS(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}
