package sandbox

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"

	minfo "github.com/clinvoke/clinvoke/internal/mountinfo"
)

// cgroupMounts returns the mount point of every cgroup and cgroup2 file
// system this process sees (/proc/self/mountinfo: v2's, each v1
// hierarchy's, and any bind of one elsewhere). The ruleset gives each
// read rights only at every level: writing cgroup.procs, tasks or a limit
// file there is how a run, root's included, would leave its cgroups and
// their limits, and cgroup migration needs no capability the run gives up.
func cgroupMounts() []string {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	return parseCgroupMounts(mi)
}

// parseCgroupMounts returns the cgroup mount points in mountinfo's text,
// each once.
func parseCgroupMounts(mountinfo []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// 36 35 0:30 / /sys/fs/cgroup rw,... shared:9 - cgroup2 cgroup2 rw
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fs, _, _ := strings.Cut(post, " ")
		if fs != "cgroup" && fs != "cgroup2" {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		p := filepath.Clean(minfo.Unescape(f[4]))
		if !isHeld(p, out) {
			out = append(out, p)
		}
	}
	return out
}
