//go:build linux

package proc

import (
	"path/filepath"
	"strconv"
	"time"
)

// cpuStat is a v2 cgroup's file of CPU time, a core file (there without
// the cpu controller).
const cpuStat = "cpu.stat"

// cpuUsage reads the CPU time a v2 cgroup's processes used, in
// microseconds, from its cpu.stat file (usage_usec), through held as
// readSmall does.
func cpuUsage(file string, held int) (int64, error) {
	b, err := readSmall(file, held)
	if err != nil {
		return 0, err
	}
	return keyed(b, "usage_usec"), nil
}

// cpuController is the cpu controller: Limits.CPU (v2 cpu.max, v1
// cpu.cfs_quota_us), and the CPU time, read from v2 cpu.stat (a core
// file, there without the controller) or v1 cpuacct.usage.
type cpuController struct{}

func (cpuController) places() []limitPlace { return cpuPlaces[:] }

var cpuPlaces = [...]limitPlace{{r: CPU, v2: ctlCPU, v1: v1CPU}}

func (cpuController) plan(p *limitPlan, e *planEnv) {
	switch {
	case e.home != nil:
		p.cpu = srcV2
	case e.account && e.v1ok(v1CPUAcct) == nil:
		p.cpu, p.need = srcV1, p.need|1<<v1CPUAcct
	case e.account:
		p.cpu = srcSample
	}
}

func (cpuController) applyV2(dir string, l Limits) error {
	if l.CPU > 0 {
		v := strconv.FormatInt(l.cpuQuota(), 10) + " " + strconv.Itoa(cpuPeriod)
		return writeFile(filepath.Join(dir, "cpu.max"), v)
	}
	return nil
}

func (cpuController) applyV1(r *v1Run, l Limits) error {
	if d := r.dir[v1CPU]; d != "" && l.CPU > 0 {
		if err := writeFile(filepath.Join(d, "cpu.cfs_period_us"), strconv.Itoa(cpuPeriod)); err != nil {
			return err
		}
		return writeFile(filepath.Join(d, "cpu.cfs_quota_us"), strconv.FormatInt(l.cpuQuota(), 10))
	}
	return nil
}

// v1CPUUsage is the v1 cpuacct file the figure reads.
const v1CPUUsage = "cpuacct.usage"

func (cpuController) readsV1() []v1File { return []v1File{{v1CPUAcct, v1CPUUsage}} }

func (cpuController) figure(p *limitPlan) figure {
	return bySource(p.cpu, cpuV2{}, cpuV1{}, cpuSampled{})
}

func (cpuController) events(ctlSet, *v1Run) figure { return nil }

// cpuV2 is the CPU time of the tree's v2 cgroup, less what an earlier
// tree used in a reused one (acct.cpuBase).
type cpuV2 struct{ counters }

func (cpuV2) read(a *acct, r *reading) {
	file := filepath.Join(a.v2, cpuStat)
	if held, err := a.fd(file); err == nil {
		if us, err := cpuUsage(file, held); err == nil {
			r.u.CPU = time.Duration(us-a.cpuBase) * time.Microsecond
		}
	}
}

// cpuV1 is the CPU time of the tree's v1 cpuacct cgroup (cpuacct.usage).
type cpuV1 struct{ counters }

func (cpuV1) read(a *acct, r *reading) {
	if ns, err := a.readInt(filepath.Join(a.v1.dir[v1CPUAcct], v1CPUUsage)); err == nil {
		r.u.CPU = time.Duration(ns)
	}
}

// cpuSampled is the most CPU time the samples saw; at least the root's
// (its rusage holds the descendants it reaped).
type cpuSampled struct{ counters }

func (cpuSampled) read(a *acct, r *reading) { r.u.CPU, r.u.CPUSampled = a.sCPU, true }

func (cpuSampled) release(a *acct, rootCPU time.Duration) { a.sCPU = max(a.sCPU, rootCPU) }
