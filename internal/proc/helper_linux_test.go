//go:build linux

package proc

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// The test binary is also every process of the trees under test: with
// helperEnv set, TestMain runs the named helper instead of the tests.
// Helpers print "pid PID STARTTIME" on stdout for each process that the
// test must see die, so the test knows them and can check after it ran
// that none is left.
const helperEnv = "PROC_TEST_HELPER"

// helpers are the processes a test can start, by name.
var helpers = map[string]func(args []string) int{
	// exit CODE: exit with CODE.
	"exit": func(args []string) int {
		n, _ := strconv.Atoi(args[0])
		return n
	},
	// signal NAME: die by the signal NAME.
	"signal": func(args []string) int {
		sig := unix.SignalNum(args[0])
		signal.Reset(sig)
		unix.Kill(os.Getpid(), sig)
		hang()
		return 0
	},
	// zl: report, then end the main thread alone (not the process) while
	// another thread runs on: /proc shows state Z, yet the process lives
	// until killed (see mainThread).
	"zl": func([]string) int {
		report()
		go hang()
		if unix.Gettid() != os.Getpid() {
			fmt.Fprintln(os.Stderr, "zl: not on the main thread")
			return 2
		}
		unix.RawSyscall(unix.SYS_EXIT, 0, 0, 0) // this thread only
		return 0
	},
	// hang: run until killed.
	"hang": func([]string) int {
		report()
		hang()
		return 0
	},
	// hangignore: run until killed, ignoring SIGINT and SIGTERM.
	"hangignore": func([]string) int {
		signal.Ignore(unix.SIGINT, unix.SIGTERM)
		report()
		hang()
		return 0
	},
	// execignoring SIGNALS HELPER ARGS...: set the comma-separated
	// SIGNALS ("SIGINT,SIGTERM") to SIG_IGN, then exec HELPER, which
	// inherits the dispositions, as a CLI started by a host that ignores
	// SIGINT does.
	"execignoring": func(args []string) int {
		for _, name := range strings.Split(args[0], ",") {
			signal.Ignore(unix.SignalNum(name))
		}
		cmd := helperCmd(args[1], args[2:]...)
		err := unix.Exec(cmd.Path, cmd.Args, cmd.Env)
		fmt.Fprintln(os.Stderr, err)
		return 2
	},
	// hangusr1: run until SIGUSR1, then exit 0.
	"hangusr1": func([]string) int {
		c := make(chan os.Signal, 1)
		signal.Notify(c, unix.SIGUSR1)
		report()
		<-c
		return 0
	},
	// forker TOKEN: report, then start hang TOKEN over and over, each in
	// a new session with an environment holding nothing but what the
	// helper needs (no marker), its output discarded; print "forking"
	// after the first. It stops at 50 children and waits to be killed.
	"forker": func(args []string) int {
		for i := range 50 {
			cmd := helperCmd("hang", args[0])
			cmd.Env = clearedEnv("hang")
			cmd.Stdout, cmd.Stderr = nil, nil
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := cmd.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
			go cmd.Wait()
			if i == 0 {
				report()
				fmt.Println("forking")
			}
		}
		hang()
		return 0
	},
	// probe [PARENT [wait]]: print what Probe says here for Auto and
	// Cgroup, with the cgroup parent PARENT (default: the host's cgroup),
	// then (with wait: after printing "probed" and reading a line) start
	// hang as a Tree with each and print its level or Start's error:
	// "level auto L err E", "level cgroup L err E", "tree auto L" (or
	// "start auto E"), "tree cgroup L" (or "start cgroup E"). Errors
	// print with what they match: "[unavailable refused permission]".
	"probe": func(args []string) int {
		parent := ""
		if len(args) > 0 {
			parent = args[0]
		}
		for _, want := range []Containment{Auto, Cgroup} {
			lvl, err := Probe(want, parent)
			fmt.Printf("level %v %v err %v %v\n", want, lvl, err, matches(err))
		}
		if len(args) > 1 && args[1] == "wait" {
			fmt.Println("probed")
			bufio.NewReader(os.Stdin).ReadString('\n')
		}
		for _, want := range []Containment{Auto, Cgroup} {
			cmd := helperCmd("hang")
			t, err := Start(&Attr{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Containment: want, CgroupParent: parent})
			if err != nil {
				fmt.Printf("start %v %v %v\n", want, err, matches(err))
				continue
			}
			fmt.Printf("tree %v %v\n", want, t.Containment())
			t.Kill()
			t.Wait()
		}
		return 0
	},
	// perl NAME: exec the adversarial Perl script NAME (see perlScripts).
	"perl": func(args []string) int {
		perl, err := exec.LookPath("perl")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		err = unix.Exec(perl, []string{"perl", "-e", perlPrelude + perlScripts[args[0]]}, os.Environ())
		fmt.Fprintln(os.Stderr, err)
		return 2
	},
	// spawn MODE THEN HELPER ARGS...: start HELPER in this process's group
	// (MODE same), in a new session (MODE setsid) or in a new session with
	// an environment holding nothing but what the helper needs, as after
	// env -i (MODE setsid-envi), then exit (THEN exit),
	// wait for it and exit 0 (wait), run until killed (hang, hangignore),
	// or exit 0 on SIGINT without touching the child (hangint).
	"spawn": func(args []string) int {
		mode, then := args[0], args[1]
		switch then {
		case "hangignore":
			signal.Ignore(unix.SIGINT, unix.SIGTERM)
		case "hangint":
			c := make(chan os.Signal, 1)
			signal.Notify(c, unix.SIGINT)
			go func() { <-c; os.Exit(0) }()
		}
		cmd := helperCmd(args[2], args[3:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: mode != "same"}
		if mode == "setsid-envi" {
			cmd.Env = clearedEnv(args[2])
		}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		switch then {
		case "exit":
			return 0
		case "wait":
			cmd.Wait()
			return 0
		}
		report()
		hang()
		return 0
	},
	// session: a CLI kept across turns. Start hang in this group (a
	// helper kept across turns), report, then for each line "turn MODE"
	// on stdin start three processes, each hang: one in this group, one in
	// a new session (a setsid daemon) and one in a new session with an
	// environment holding nothing but what the helper needs (an env -i
	// daemon). With MODE children the daemons are this process's children;
	// with MODE orphans each is started by an intermediate spawn that
	// exits at once, as `setsid -f` does; once those have exited, it
	// prints "turn started". With MODE held each daemon is started by an
	// intermediate spawn that reports itself and exits on SIGINT, leaving
	// the daemon orphaned then (as a CLI's tool runner interrupted). A
	// line "turn forker TOKEN" starts forker TOKEN alone instead, and
	// prints "turn started". Its children are reaped as they exit; at the
	// end of stdin it runs until killed.
	"session": func([]string) int {
		start := func(cmd *exec.Cmd) bool {
			if err := cmd.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return false
			}
			go cmd.Wait()
			return true
		}
		if !start(helperCmd("hang")) {
			return 2
		}
		report()
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 && f[0] == "turn" && f[1] == "forker" {
				if !start(helperCmd("forker", f[2])) {
					return 2
				}
				fmt.Println("turn started")
				continue
			}
			if len(f) != 2 || f[0] != "turn" {
				fmt.Fprintf(os.Stderr, "session: bad line %q\n", sc.Text())
				continue
			}
			if !start(helperCmd("hang")) {
				return 2
			}
			switch f[1] {
			case "children":
				daemon, envi := helperCmd("hang"), helperCmd("hang")
				daemon.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
				envi.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
				envi.Env = clearedEnv("hang")
				if !start(daemon) || !start(envi) {
					return 2
				}
			case "held":
				if !start(helperCmd("spawn", "setsid", "hangint", "hang")) || !start(helperCmd("spawn", "setsid-envi", "hangint", "hang")) {
					return 2
				}
			case "orphans":
				for _, mode := range []string{"setsid", "setsid-envi"} {
					if err := helperCmd("spawn", mode, "exit", "hang").Run(); err != nil {
						fmt.Fprintln(os.Stderr, err)
						return 2
					}
				}
			}
			fmt.Println("turn started")
		}
		hang()
		return 0
	},
	// group: start hang in this group, survive SIGINT, and print how the
	// child ended.
	"group": func([]string) int {
		c := make(chan os.Signal, 1)
		signal.Notify(c, unix.SIGINT)
		cmd := helperCmd("hang")
		if err := cmd.Start(); err != nil {
			return 2
		}
		report()
		err := cmd.Wait()
		fmt.Printf("child %v\n", err)
		return 0
	},
	// tty: check that /dev/tty opens, then exit 0 on SIGINT.
	"tty": func([]string) int {
		c := make(chan os.Signal, 1)
		signal.Notify(c, unix.SIGINT)
		f, err := os.Open("/dev/tty")
		if err != nil {
			fmt.Printf("tty %v\n", err)
			return 1
		}
		f.Close()
		fmt.Println("tty ok")
		report()
		<-c
		fmt.Println("got SIGINT")
		return 0
	},
	// daemon FILE: a server started before the run; on SIGUSR1 it starts
	// hang, in its own (the daemon's) process group, with the environment
	// line in FILE added (a client's environment handed over IPC, as
	// build daemons do), then runs until killed.
	"daemon": func(args []string) int {
		c := make(chan os.Signal, 1)
		signal.Notify(c, unix.SIGUSR1)
		report()
		<-c
		b, err := os.ReadFile(args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		cmd := helperCmd("hang")
		cmd.Env = append(cmd.Env, string(b))
		cmd.Stdout = nil
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Printf("worker %d\n", cmd.Process.Pid)
		hang()
		return 0
	},
	// init: as PID 1 of a new PID and mount namespace, mount /proc, run
	// spawn same exit hang as a Tree (its child re-parents to this
	// process at once), Kill and Wait it, then print "zombies N": how
	// many zombie children this process is left with, and, at the cgroup
	// level, "home DIR" for each of its cgroup homes (v2 and v1) once it
	// removed it. It prints "skip
	// REASON" if it cannot set up.
	"init": func([]string) int {
		if os.Getpid() != 1 {
			fmt.Println("skip not PID 1")
			return 0
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			fmt.Println("skip", err)
			return 0
		}
		if err := unix.Mount("proc", "/proc", "proc", 0, ""); err != nil {
			fmt.Println("skip", err)
			return 0
		}
		cmd := helperCmd("spawn", "same", "exit", "hang")
		t, err := Start(&Attr{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		<-t.Exited()
		time.Sleep(50 * time.Millisecond) // the orphan runs
		t.Kill()
		if _, err := t.Wait(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Printf("zombies %d\n", len(zombieChildren()))
		// Its keeper dies with the namespace when this process exits,
		// before it could remove the home: remove it here, and say
		// where it was, so that the test can check nothing is left.
		homes.mu.Lock()
		r := homes.m[""]
		homes.mu.Unlock()
		if r != nil && r.home != nil {
			r.home.drain()
			if err := (&runCgroup{dir: r.home.dir}).removeAll(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			fmt.Printf("home %s\n", r.home.dir)
		}
		if v1 := v1IfOpen(); v1 != nil {
			for _, h := range v1.homes() {
				if err := (&v1Run{dir: [numV1]string{h}}).remove(); err != nil {
					fmt.Fprintln(os.Stderr, err)
				}
				fmt.Printf("home %s\n", h)
			}
		}
		return 0
	},
	// alloc MIB: report, allocate MIB MiB (touched, so that it is
	// resident and charged), print "allocated", then run until killed.
	"alloc": func(args []string) int {
		n, _ := strconv.Atoi(args[0])
		report()
		if _, err := allocMiB(n); err != nil {
			fmt.Fprintln(os.Stderr, "alloc:", err)
			return 2
		}
		fmt.Println("allocated")
		hang()
		return 0
	},
	// allocator: report, then for each line "alloc MIB" on stdin
	// allocate MIB MiB more and print "allocated", for each line "free"
	// free all of it and print "freed"; run until killed.
	"allocator": func([]string) int {
		report()
		var held [][]byte
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 2 && f[0] == "alloc":
				n, _ := strconv.Atoi(f[1])
				b, err := allocMiB(n)
				if err != nil {
					fmt.Fprintln(os.Stderr, "allocator:", err)
					return 2
				}
				held = append(held, b)
				fmt.Println("allocated")
			case len(f) == 1 && f[0] == "free":
				for _, b := range held {
					unix.Munmap(b)
				}
				held = nil
				fmt.Println("freed")
			}
		}
		hang()
		return 0
	},
	// spawnalloc MIB: start alloc MIB as a child (a tool), wait for it,
	// print "child ERR" (how it ended), then run until killed.
	"spawnalloc": func(args []string) int {
		report()
		cmd := helperCmd("alloc", args[0])
		err := cmd.Run()
		fmt.Printf("child %v\n", err)
		hang()
		return 0
	},
	// spin: report, print "spinning", then keep every CPU busy until
	// killed.
	"spin": func([]string) int {
		report()
		for range runtime.GOMAXPROCS(0) - 1 {
			go spin()
		}
		fmt.Println("spinning")
		spin()
		return 0
	},
	// oomhost: hold 300 MiB, then start alloc 200 as a tree under a
	// memory limit of 100 MiB, its forking thread kept in the tree's
	// cgroups for a second after the fork (it prints "forked on the main
	// thread" if that thread is the main one); print how the tree ended
	// and "host survived". Start is called from the main goroutine with
	// nothing else to run, so that a goroutine it starts is likely to be
	// given the main thread.
	"oomhost": func([]string) int {
		held, err := allocMiB(300)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		hook := func() {
			if unix.Gettid() == unix.Getpid() {
				fmt.Println("forked on the main thread")
			}
			time.Sleep(time.Second)
		}
		cmd := helperCmd("alloc", "200")
		tune := tuned(func(tu *tuning) { tu.hooks = &hooks{forked: hook} })
		t, err := Start(&Attr{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Limits: Limits{MemoryMax: 100 << 20}, tune: tune})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		<-t.Exited()
		t.Kill()
		st, _ := t.Wait()
		fmt.Printf("tree %s %v\n", st.Signal, t.Usage().RootOOMKilled)
		fmt.Printf("host survived with %d MiB\n", len(held)>>20)
		return 0
	},
	// host LEVEL HELPER ARGS...: start HELPER as a proc.Tree at LEVEL
	// (auto, cgroup, tracking; stdout shared), report, then run until
	// killed. For a host that dies.
	"host": func(args []string) int {
		level := map[string]Containment{"auto": Auto, "cgroup": Cgroup, "tracking": Tracking}[args[0]]
		cmd := helperCmd(args[1], args[2:]...)
		t, err := Start(&Attr{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Stdout: os.Stdout, Stderr: os.Stderr, Containment: level})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		report()
		<-t.Exited()
		return 0
	},
}

// perlPrelude defines report(PID): print "pid PID STARTTIME", as report
// does.
const perlPrelude = `use POSIX (); $| = 1;
sub report { my $p = shift; open(my $f, "<", "/proc/$p/stat") or die "$!"; my $s = <$f>; $s =~ s/^.*\) //; my @f = split / /, $s; print "pid $p $f[19]\n"; }
`

// perlScripts are processes that hide from tracking, each a root that
// reports itself and what it starts, then exits 0, leaving something
// behind. Perl forks without a runtime's threads, so each trick is done
// exactly as a C daemon does it.
var perlScripts = map[string]string{
	// envi: a daemon started with setsid and a cleared environment, as
	// "setsid -f env -i sleep 7777" does.
	"envi": `report($$); my $c = fork(); if ($c == 0) { POSIX::setsid(); %ENV = (); report($$); exec("sleep", "7777") or die; } waitpid(-1, POSIX::WNOHANG); exit 0;`,
	// fastenvi: double fork, setsid and an empty environment, done
	// within milliseconds of the start: the middle process exits at once.
	"fastenvi": `report($$); my $c = fork(); if ($c == 0) { POSIX::setsid(); if (fork() == 0) { %ENV = (); report($$); exec("sleep", "7777") or die; } POSIX::_exit(0); } waitpid($c, 0); exit 0;`,
	// retitle: a daemon that keeps its environment but sets a long
	// process title, which overwrites what /proc/PID/environ shows (as
	// nginx, redis-server --daemonize and gunicorn do).
	"retitle": `report($$); my $c = fork(); if ($c == 0) { POSIX::setsid(); $0 = "x" x 16384; report($$); sleep(7777); exit 0; } exit 0;`,
	// forkbomb: fork for ever, every child too: the tree grows until
	// a fork is refused, and every process keeps trying.
	"forkbomb": `report($$); print "bombing\n"; while (1) { fork(); }`,
	// cloneparent: a sibling made with clone(CLONE_PARENT): its parent is
	// the host, never the root.
	"cloneparent": `report($$); my $c = syscall(56, 0x8000 | 17, 0, 0, 0, 0); if ($c == 0) { report($$); exec("sleep", "7777") or die; } exit 0;`,
}

// helperCmd returns a command running the named helper.
func helperCmd(name string, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(exe, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, helperEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, helperEnv+"="+name)
	if os.Getenv("GORACE") == "" {
		// A race-enabled helper otherwise sleeps 1 s when it exits.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd
}

// clearedEnv returns the environment of a helper that cleared its own:
// only what it needs to run as the named helper.
func clearedEnv(name string) []string {
	env := []string{helperEnv + "=" + name}
	if os.Getenv("GORACE") == "" {
		env = append(env, "GORACE=atexit_sleep_ms=0")
	}
	return env
}

// allocMiB maps n MiB of anonymous memory and makes it resident (the
// kernel populates it: no instrumented write touches it, so a race-enabled
// helper does not double it with shadow memory).
func allocMiB(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	if err := unix.Madvise(b, unix.MADV_POPULATE_WRITE); err != nil {
		// Before Linux 5.14: touch each page.
		for i := 0; i < len(b); i += os.Getpagesize() {
			b[i] = 1
		}
	}
	return b, nil
}

// spin keeps a CPU busy for ever.
func spin() {
	for x := 0; ; x++ {
		if x < 0 {
			runtime.Gosched()
		}
	}
}

func hang() {
	for {
		time.Sleep(time.Hour)
	}
}

// report prints "pid PID STARTTIME".
func report() {
	p, err := readStat(int32(os.Getpid()))
	if err != nil {
		panic(err)
	}
	os.Stdout.WriteString(fmt.Sprintf("pid %d %d\n", p.pid, p.start))
}

var (
	usedMu sync.Mutex
	used   = map[string]bool{}
)

// markUsed records that a test ran the helpers named in args.
func markUsed(args ...string) {
	usedMu.Lock()
	defer usedMu.Unlock()
	for _, a := range args {
		if helpers[a] != nil {
			used[a] = true
		}
	}
}

// mainThread keeps the helper zl on the process's main thread: init runs
// there, and locking it there makes TestMain, and so the helper, run on it.
func init() {
	if os.Getenv(helperEnv) == "zl" {
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		h := helpers[name]
		if h == nil {
			fmt.Fprintf(os.Stderr, "proc test: unknown helper %q\n", name)
			os.Exit(2)
		}
		os.Exit(h(os.Args[1:]))
	}
	flag.Parse()
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && !testing.Short() {
		for name := range helpers {
			if !used[name] {
				fmt.Fprintf(os.Stderr, "helper %q was not used by any test\n", name)
				code = 1
			}
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines leaked: %v\n", err)
			code = 1
		}
	}
	if code == 0 {
		// Children of the test process left as zombies were not reaped by
		// Wait or by a subreaper's Kill.
		if z := zombieChildren(); len(z) > 0 {
			fmt.Fprintf(os.Stderr, "zombie children of the test process (not reaped): %v\n", z)
			for _, pid := range z {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
				fmt.Fprintf(os.Stderr, "%s\n", b)
			}
			code = 1
		}
	}
	os.Exit(code)
}

// zombieChildren lists the test process's children that are zombies.
func zombieChildren() []int32 {
	sn, err := theScanner().scan(1 << 63)
	if err != nil {
		return nil
	}
	var z []int32
	for _, p := range sn.procs {
		if p.ppid == int32(os.Getpid()) && p.zombie() {
			z = append(z, p.pid)
		}
	}
	return z
}
