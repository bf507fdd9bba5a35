package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/clinvoke/clinvoke/internal/procstat"
)

// tempOwner names this process in its runs' temporary directories: its
// process ID and start time ("PID.START-"), which no other process has
// while it lives. Neither changes, so /proc/self/stat is read once, at
// the first run's NewTemp.
var tempOwner = sync.OnceValue(func() string {
	st, ok := procStat(os.Getpid())
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d.%d-", os.Getpid(), st.Start)
})

// sweepTemps removes, from the host's temporary directory, the runs'
// temporary directories of this user whose program is gone: its process ID
// is free, or taken by a process that started at another time. A directory
// whose name names no program (or this one) is left.
func sweepTemps() {
	tmp := os.TempDir()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		owner, ok := strings.CutPrefix(e.Name(), tempPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pid, start, ok := parseTempOwner(owner)
		if !ok || pid == os.Getpid() {
			continue
		}
		if st, alive := procStat(pid); alive && st.Start == start {
			continue
		}
		path := filepath.Join(tmp, e.Name())
		fi, err := os.Lstat(path)
		if err != nil || !fi.IsDir() {
			continue
		}
		if !ownedByMe(fi) {
			continue
		}
		os.RemoveAll(path)
	}
}

// parseTempOwner reads "PID.START-…", the part of a run's temporary
// directory's name after tempPrefix.
func parseTempOwner(s string) (pid int, start uint64, ok bool) {
	id, _, found := strings.Cut(s, "-")
	p, st, dot := strings.Cut(id, ".")
	if !found || !dot {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(st, 10, 64)
	return pid, start, err1 == nil && err2 == nil && pid > 0
}

// procStat reads /proc/PID/stat of process pid: the sweep of temporary
// directories reads its parent and its start time.
func procStat(pid int) (procstat.Stat, bool) {
	st, err := procstat.Read(pid)
	return st, err == nil
}
