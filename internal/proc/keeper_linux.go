//go:build linux

package proc

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// keeperScript is the keeper: a shell that blocks reading a pipe whose
// only writer is the host. When the host dies, however it dies, the kernel
// closes that end, read returns, and the keeper kills every tree of the
// home and removes their cgroups and the home. A host that exits normally
// has no tree left, so the keeper only tidies up. The keeper stays in the
// host's cgroup, not in the home, so that it is not killed with the trees
// and does not keep the home populated. If the keeper is killed with the
// host (a stop of the host's whole cgroup), the next host in the same
// parent kills and removes what is left (see removeDeadHomes).
//
// The arguments after the home are the host's homes in cgroup v1
// hierarchies: once the trees are killed their cgroups there are empty
// and removed, then the homes. A process still listed in one (a tracking
// level tree's, which cgroup.kill does not reach) is killed by its pid
// first: one read of cgroup.procs and a kill, microseconds apart, during
// which the pid would have to be freed and reused for the wrong process
// to be hit.
const keeperScript = `read _
for d in "$1"/*/; do [ -e "${d}cgroup.kill" ] && echo 1 >"${d}cgroup.kill"; done
home=$1
shift
i=0
while [ $i -lt 50 ]; do
	left=
	for d in "$home"/*/; do [ -d "$d" ] && { rmdir "$d" 2>/dev/null || left=1; }; done
	for h in "$@"; do
		for d in "$h"/*/; do
			[ -d "$d" ] || continue
			for p in $(cat "${d}cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
			rmdir "$d" 2>/dev/null || left=1
		done
	done
	[ -z "$left" ] && { rmdir "$home" "$@" 2>/dev/null; exit 0; }
	sleep 0.1 2>/dev/null || sleep 1
	i=$((i+1))
done
`

// keeperShell runs the keeper.
const keeperShell = "/bin/sh"

// A keeper is the process that kills a home's trees when the host dies.
type keeper struct {
	home string
	v1   []string // the host's homes in cgroup v1 hierarchies
	proc *os.Process
	w    *os.File // the host's end of the keeper's stdin; never written
}

// ensure starts the keeper, or starts it again if it has died (someone
// killed it). The caller holds homes.mu.
func (k *keeper) ensure() error {
	if k.proc != nil {
		if err := k.proc.Signal(syscall.Signal(0)); !errors.Is(err, os.ErrProcessDone) {
			return nil
		}
		k.proc.Wait()
		k.w.Close()
		k.proc, k.w = nil, nil
	}
	r, w, err := os.Pipe() // close-on-exec: no tree inherits the host's end
	if err != nil {
		return fmt.Errorf("starting the cgroup keeper: %w", err)
	}
	defer r.Close()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		w.Close()
		return fmt.Errorf("starting the cgroup keeper: %w", err)
	}
	defer null.Close()
	p, err := os.StartProcess(keeperShell, append([]string{"clinvoke-keeper", "-c", keeperScript, "clinvoke-keeper", k.home}, k.v1...), &os.ProcAttr{
		Dir: "/",
		// Nothing of the host's environment: the keeper is no agent.
		Env:   []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
		Files: []*os.File{r, null, null},
		// Its own session: a terminal's Ctrl-C for the host must not
		// end the keeper before the host.
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		w.Close()
		return fmt.Errorf("starting the cgroup keeper %s: %w", keeperShell, err)
	}
	k.proc, k.w = p, w
	return nil
}
