//go:build windows

package proc

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// killTimeout bounds Kill.
const killTimeout = 5 * time.Second

// treeSys is the Windows state of a Tree: a Job Object that holds the root
// and, by inheritance, everything it starts. The job is created with
// JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, so the tree dies with the host even
// if the host crashes.
type treeSys struct {
	proc   *os.Process
	handle windows.Handle // the root, for waiting
	job    windows.Handle
	done   chan struct{}
	waited atomic.Bool
}

func start(a *Attr) (*Tree, error) {
	if err := checkAttr(a); err != nil {
		return nil, err
	}
	if a.Containment != Auto && a.Containment != Job {
		return nil, levelError(a.Containment)
	}
	if a.TTY != nil {
		return nil, errors.New("proc: Attr.TTY is not supported on Windows")
	}
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, fmt.Errorf("proc: create job object: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return nil, fmt.Errorf("proc: set job limits: %w", err)
	}
	var null *os.File
	files := []*os.File{a.Stdin, a.Stdout, a.Stderr}
	for i, f := range files {
		if f == nil {
			if null == nil {
				if null, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
					windows.CloseHandle(job)
					return nil, fmt.Errorf("proc: %w", err)
				}
				defer null.Close()
			}
			files[i] = null
		}
	}
	args := a.Args
	if len(args) == 0 {
		args = []string{a.Path}
	}
	// Created suspended, so that it is in the job before it can start a
	// process of its own; in a new process group, so that CTRL_BREAK can
	// be sent to it alone.
	sys := &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_SUSPENDED}
	p, err := os.StartProcess(a.Path, args, &os.ProcAttr{Dir: a.Dir, Env: a.Env, Files: files, Sys: sys})
	if err != nil {
		windows.CloseHandle(job)
		return nil, err
	}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(p.Pid))
	if err == nil {
		err = windows.AssignProcessToJobObject(job, h)
	}
	if err == nil {
		err = resumeProcess(uint32(p.Pid))
	}
	if err != nil {
		p.Kill()
		p.Wait()
		if h != 0 {
			windows.CloseHandle(h)
		}
		windows.CloseHandle(job)
		return nil, fmt.Errorf("proc: put the root in its job: %w", err)
	}
	t := &Tree{pid: p.Pid, exited: make(chan struct{}), log: loggerOf(a.Logger), start: time.Now(), level: Job}
	t.sys = treeSys{proc: p, handle: h, job: job, done: make(chan struct{})}
	go func() {
		defer close(t.sys.done)
		windows.WaitForSingleObject(h, windows.INFINITE)
		close(t.exited)
	}()
	return t, nil
}

// resumeProcess resumes the threads of a process created suspended.
func resumeProcess(pid uint32) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(snap)
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	resumed := false
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != pid {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if err != nil {
			return err
		}
		_, err = windows.ResumeThread(th)
		windows.CloseHandle(th)
		if err != nil {
			return err
		}
		resumed = true
	}
	if !resumed {
		return errors.New("no thread to resume")
	}
	return nil
}

// snapshot has nothing to record: the Job Object holds the whole tree.
func (t *Tree) snapshot() {}

func (t *Tree) signal(s Signal) error {
	t.log.Debug("proc: signal", "pid", t.pid, "signal", s.String())
	switch s {
	case Interrupt:
		err := windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(t.pid))
		if err != nil {
			select {
			case <-t.exited:
				return nil
			default:
			}
			return fmt.Errorf("proc: CTRL_BREAK: %w", err)
		}
		return nil
	case Terminate, Kill:
		if err := windows.TerminateJobObject(t.sys.job, killedExitCode); err != nil {
			return fmt.Errorf("proc: terminate job: %w", err)
		}
		return nil
	}
	return fmt.Errorf("proc: unknown signal %d", int(s))
}

// jobPids lists the processes in the job.
func (t *Tree) jobPids() ([]int, error) {
	// JOBOBJECT_BASIC_PROCESS_ID_LIST: two DWORDs, then ULONG_PTR ids.
	var buf [2 + 256]uintptr
	err := windows.QueryInformationJobObject(t.sys.job, windows.JobObjectBasicProcessIdList,
		uintptr(unsafe.Pointer(&buf[0])), uint32(unsafe.Sizeof(buf)), nil)
	if err != nil && err != windows.ERROR_MORE_DATA {
		return nil, err
	}
	m := *(*uint32)(unsafe.Add(unsafe.Pointer(&buf[0]), 4)) // NumberOfProcessIdsInList
	pids := make([]int, 0, m)
	for i := uint32(0); i < m && i < 256; i++ {
		pids = append(pids, int(buf[1+i]))
	}
	return pids, nil
}

func (t *Tree) kill() Report {
	begin := time.Now()
	deadline := begin.Add(killTimeout)
	var rep Report
	pids, _ := t.jobPids()
	rep.Killed = pids
	if err := windows.TerminateJobObject(t.sys.job, killedExitCode); err != nil {
		t.log.Debug("proc: terminate job", "pid", t.pid, "err", err)
	}
	backoff := 200 * time.Microsecond
	for {
		left, err := t.jobPids()
		if err != nil || len(left) == 0 {
			break
		}
		if !time.Now().Before(deadline) {
			rep.Survivors = left
			break
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 10*time.Millisecond)
	}
	rep.Elapsed = time.Since(begin)
	return rep
}

func (t *Tree) wait() (State, error) {
	ps, err := t.reapOnce(func() {
		windows.CloseHandle(t.sys.handle)
		// Closing the job kills whatever is still in it.
		windows.CloseHandle(t.sys.job)
	})
	if err != nil {
		return State{}, err
	}
	if code := ps.ExitCode(); uint32(code) != killedExitCode {
		return State{Code: code}, nil
	}
	return State{Code: -1, Signal: "killed"}, nil
}

// killedExitCode is the exit status TerminateJobObject gives the processes
// it ends. Windows has no death by signal; a status no CLI uses stands for
// one, so a killed run reports -1 as on Unix rather than a plausible exit
// status such as 1. (The value spells KILL in ASCII.)
const killedExitCode = 0x4B494C4C

// probe is Probe here: the only level is Job.
func probe(want Containment, _ string) (Containment, error) {
	if want != Auto && want != Job {
		return Job, levelError(want)
	}
	return Job, nil
}
