package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/caddyserver/caddy/v2"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/llmrelay/caddy-llm-relay"
)

// runChild is the child process (relaybench -child <config.json>): it
// loads the config, then answers the parent's commands on stdin, one per
// line, with one line on stdout, until stdin closes:
//
//	ready  "ok" (the config is loaded)
//	cpu    the CPU time (user and system) this process has used, in ns
//	syscalls  the read and write system calls it has made (/proc/self/io; 0 where absent)
//	runwait   the time its threads have waited for a CPU, in ns (/proc schedstat; 0 where absent)
//	mem    its heap and goroutine stacks in use after a collection, in bytes
//	cpuprofile <file>, stopprofile   a CPU profile of this process
//	memprofile <file>                its allocation profile (all so far)
func runChild(cfgPath string) {
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "relaybench child: %v\n", err)
		os.Exit(1)
	}
	if err := caddy.Load(cfg, true); err != nil {
		fmt.Fprintf(os.Stderr, "relaybench child: loading %s: %v\n", cfgPath, err)
		os.Exit(1)
	}
	var profile *os.File
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "ready":
			fmt.Println("ok")
		case "cpu":
			var ru syscall.Rusage
			if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
				fmt.Printf("error %v\n", err)
				continue
			}
			fmt.Println(ru.Utime.Nano() + ru.Stime.Nano())
		case "syscalls":
			fmt.Println(syscalls())
		case "runwait":
			fmt.Println(runWait())
		case "mem":
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			fmt.Println(ms.HeapInuse + ms.StackInuse)
		case "cpuprofile":
			f, err := os.Create(arg)
			if err == nil {
				err = pprof.StartCPUProfile(f)
			}
			if err != nil {
				fmt.Printf("error %v\n", err)
				continue
			}
			profile = f
			fmt.Println("ok")
		case "stopprofile":
			pprof.StopCPUProfile()
			if profile == nil {
				fmt.Println("error no profile running")
				continue
			}
			if err := profile.Close(); err != nil {
				fmt.Printf("error %v\n", err)
				continue
			}
			profile = nil
			fmt.Println("ok")
		case "memprofile":
			if err := writeMemProfile(arg); err != nil {
				fmt.Printf("error %v\n", err)
				continue
			}
			fmt.Println("ok")
		default:
			fmt.Printf("error unknown command %q\n", in.Text())
		}
	}
	_ = caddy.Stop()
	os.Exit(0)
}

// writeMemProfile writes the allocs profile (every allocation sampled
// since the process started) to path.
func writeMemProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// runWait is the time this process's threads have spent runnable but
// not running (the second field of /proc/self/task/*/schedstat: the
// run-queue delay), in ns, or 0 where that is unknown. Threads that have
// exited are not counted; the Go runtime rarely ends one.
func runWait() int64 {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			d, _ := strconv.ParseInt(f[1], 10, 64)
			n += d
		}
	}
	return n
}

// syscalls is the number of read and write system calls (syscr + syscw in
// /proc/self/io) this process has made, or 0 where that is unknown.
func syscalls() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	var n int64
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		if k == "syscr" || k == "syscw" {
			c, _ := strconv.ParseInt(v, 10, 64)
			n += c
		}
	}
	return n
}
