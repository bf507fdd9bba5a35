package proc

import (
	"fmt"
	"math"
	"os"
	"strconv"
)

// The largest limits the kernel holds. Each controller file refuses a
// value above its range (EINVAL), or worse, reads it as no limit at all:
// a CPU quota past 2^63 microseconds wraps to a negative number, which
// cpu.cfs_quota_us takes for "no quota", and a memory limit of the page
// counter's maximum is memory.max's "max". Limits are checked against
// these bounds before anything starts, so that a limit is never turned
// into none, and never fails half-written.

// maxCFSQuota is the largest CPU quota the kernel takes, in microseconds:
// both cpu.max (cgroup v2) and cpu.cfs_quota_us (v1) go through
// tg_set_cfs_bandwidth, which refuses a quota above 2^44-1 µs (the
// bandwidth of 64 bits shifted by 20; measured on Linux 6.18:
// 17592186044415 is taken, one more is EINVAL).
const maxCFSQuota = 1<<44 - 1

// pidMaxLimit is the kernel's PID_MAX_LIMIT on 64-bit kernels, the most a
// pids.max file takes whatever kernel.pid_max is (measured on Linux 6.18:
// 4194304 is taken, 4194305 is EINVAL).
const pidMaxLimit = 1 << 22

// MaxLimits returns the largest value of each field of Limits the kernel
// takes as a limit, on a 64-bit kernel (a 32-bit kernel takes less, and
// refuses more tasks with an error):
//
//   - MemoryMax and MemoryHigh: one byte less than the page counter's
//     maximum, LONG_MAX / page size pages (2^63 - 4096 bytes with 4 KiB
//     pages), which memory.max, memory.high and v1 memory.limit_in_bytes
//     read as no limit;
//   - Tasks: PID_MAX_LIMIT less one (4194303), the most a pids.max file
//     takes less the task that the start of a tree counts in its cgroup
//     v1 (the forking thread);
//   - CPU: the largest CFS quota (2^44-1 µs) per period of 100 ms,
//     175921860.44415 cores.
func MaxLimits() Limits {
	page := int64(os.Getpagesize())
	mem := math.MaxInt64/page*page - 1
	return Limits{MemoryMax: mem, MemoryHigh: mem, Tasks: pidMaxLimit - 1, CPU: float64(maxCFSQuota) / cpuPeriod}
}

// checkRange returns an error naming the first limit of l above
// MaxLimits, or nil. (NaN and negative values are validate's.) Bytes and
// tasks are compared as integers: near 2^63 a float64 cannot tell the
// largest limit from the page counter's maximum.
func (l Limits) checkRange() error {
	m := MaxLimits()
	var r Resource
	var v, max string
	switch {
	case l.MemoryMax > m.MemoryMax:
		r, v, max = Memory, strconv.FormatInt(l.MemoryMax, 10), strconv.FormatInt(m.MemoryMax, 10)
	case l.MemoryHigh > m.MemoryHigh:
		r, v, max = MemoryHigh, strconv.FormatInt(l.MemoryHigh, 10), strconv.FormatInt(m.MemoryHigh, 10)
	case l.Tasks > m.Tasks:
		r, v, max = Tasks, strconv.FormatInt(l.Tasks, 10), strconv.FormatInt(m.Tasks, 10)
	case l.CPU > m.CPU:
		r, v, max = CPU, strconv.FormatFloat(l.CPU, 'g', -1, 64), strconv.FormatFloat(m.CPU, 'f', -1, 64)
	default:
		return nil
	}
	return fmt.Errorf("proc: a %s limit of %s is above the largest the kernel takes, %s", r, v, max)
}
