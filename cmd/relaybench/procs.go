package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmrelay/caddy-llm-relay/cmd/internal/inproc"
)

// The bench runs each system in its own process, as an operator runs
// them: the simulator, the relay and reverse_proxy are each a Caddy in a
// child process (this binary, re-executed with -child), and the client is
// this process. The CPU time and the memory of a target are then read from
// the process that serves it alone (see proc), not from a process shared
// with the client and the simulator.

// globalOptions opens every child's Caddyfile. Everything listens on
// 127.0.0.1 only; the admin API is off and nothing is written to disk.
// Logging is at -log-level, INFO by default as in any Caddy: the relay
// then logs one line per request, which reverse_proxy does not, and that
// line is part of its cost. Each child's stderr is a file (see startProcs).
const globalOptions = `{
	admin off
	persist_config off
	auto_https off
	skip_install_trust
	default_bind 127.0.0.1
	grace_period 2s
	log {
		output stderr
		level %s
	}
}
`

// simSites: the simulator (a small fixed completion, immediate unless
// -tokens-per-sec is set) and a slow one for -shadow (200 ms to first
// byte). Ports: sim, slow.
const simSites = `
http://:%[1]d {
	bind 127.0.0.1
	llm_simulator {
		seed 1
		reasoning_tokens %[3]d
		content_tokens %[4]d
		pattern steady %[5]s
		ttfb 0
	}
}

http://:%[2]d {
	bind 127.0.0.1
	llm_simulator {
		seed 2
		reasoning_tokens %[3]d
		content_tokens %[4]d
		pattern steady %[5]s
		ttfb 200ms
	}
}
`

// relaySites: the relay in front of sim (also as the aliases
// sim-continue and sim-error, the same chain of two targets (the
// simulator under two names: a stream has a target to be continued on)
// with after_commit continue and error, for -after-commit); the relay with every request also
// copied to the slow simulator (-shadow); and the relay in front of sim as
// an Anthropic upstream (OpenAI clients' requests are translated), and for
// Responses clients as a Chat provider (translated) and as OpenAI itself
// (native) (-translate, -translate-responses). Ports: relay, shadowed,
// claude, sim, slow.
const relaySites = `
http://:%[1]d {
	bind 127.0.0.1
%[6]s}

http://:%[2]d {
	bind 127.0.0.1
	llm_relay {
		upstream sim http://127.0.0.1:%[4]d/v1
		upstream slow http://127.0.0.1:%[5]d/v1
		model sim-reasoner {
			to sim
			shadow slow 100 {
				max_concurrent 16
			}
		}
	}
}

http://:%[3]d {
	bind 127.0.0.1
	llm_relay {
		upstream sim http://127.0.0.1:%[4]d/v1 {
			api anthropic
		}
		upstream simchat http://127.0.0.1:%[4]d/v1 {
			api chat
		}
		upstream native http://127.0.0.1:%[4]d/v1
		model sim-reasoner {
			to sim
		}
		model sim-chat {
			to simchat sim-reasoner
		}
		model sim-native {
			to native sim-reasoner
		}
	}
}
`

// relayBlock is the relay site's llm_relay block (relaySites' first
// site, and -trace's traced copy of it), in front of the simulator on
// simPort: sim-reasoner, and sim-continue and sim-error, the same chain
// of two targets (the simulator under two names) with after_commit
// continue and error (-after-commit).
func relayBlock(simPort int) string {
	return strings.ReplaceAll(`	llm_relay {
		upstream sim http://127.0.0.1:SIM/v1
		upstream sim2 http://127.0.0.1:SIM/v1
		model sim-reasoner {
			to sim
		}
		model sim-continue {
			to sim sim-reasoner
			to sim2 sim-reasoner
			failover {
				after_commit continue
			}
		}
		model sim-error {
			to sim sim-reasoner
			to sim2 sim-reasoner
			failover {
				after_commit error
			}
		}
	}
`, "SIM", strconv.Itoa(simPort))
}

// proxySites: the baseline, a plain reverse_proxy in front of sim. Ports:
// proxy, sim.
const proxySites = `
http://:%[1]d {
	bind 127.0.0.1
	reverse_proxy 127.0.0.1:%[2]d
}
`

// stateSite (-state-redis): the relay with a client key that has a budget
// and a price for the simulator's model, so every request is accounted
// and its spend shared; state is the relay's state line. The same site
// with `state local` is the baseline. Ports: the site, sim.
const stateSite = `
http://:%[1]d {
	bind 127.0.0.1
	llm_relay {
		key bench-key team budget 1000000 per day
		upstream sim http://127.0.0.1:%[2]d/v1
		model sim-reasoner {
			to sim
		}
		price sim-reasoner {
			input 1
			output 2
		}
		%[3]s
	}
}
`

// siteURLs are the base URLs of the sites, and the processes serving them.
type siteURLs struct {
	sim, relay, proxy, shadowed, claude string
	simProc, relayProc, proxyProc       *proc
	// -state-redis: the keyed relay with state local and with state redis.
	local, redis         string
	localProc, redisProc *proc
	// -handoff: the relay's site with the hand-off aliases (handoff.go),
	// served by relayProc.
	handoff string
	// -resume: the relay's sites with and without resume (resume.go),
	// served by relayProc.
	resumeOn, resumeOff string
	// -trace: the relay's and reverse_proxy's sites with Caddy's tracing
	// for the requests that ask for it (trace.go), served by relayProc
	// and proxyProc.
	relayTrace, proxyTrace string
}

// startProcs picks free ports, writes one Caddyfile per child process and
// starts the simulator, the relay and reverse_proxy, each in its own
// process, logging to a file in dir.
func startProcs(o options, dir string) (siteURLs, error) {
	ports, err := inproc.FreePorts(17)
	if err != nil {
		return siteURLs{}, err
	}
	pSim, pSlow, pRelay, pProxy, pShadowed, pClaude := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]
	pLocal, pRedis := ports[6], ports[7]
	pHandoff, pReason, pAnswer, pReasonSlow, pAnswerSlow := ports[8], ports[9], ports[10], ports[11], ports[12]
	pResumeOn, pResumeOff := ports[13], ports[14]
	pRelayTrace, pProxyTrace := ports[15], ports[16]
	head := fmt.Sprintf(globalOptions, o.logLevel)
	tps := strconv.FormatFloat(o.tokensPerSec, 'f', -1, 64)
	simSrc := head + fmt.Sprintf(simSites, pSim, pSlow, o.reasoningTokens, o.contentTokens, tps)
	relaySrc := head + fmt.Sprintf(relaySites, pRelay, pShadowed, pClaude, pSim, pSlow, relayBlock(pSim))
	if o.handoff {
		// Only then: the other measurements' processes stay as they were.
		simSrc += fmt.Sprintf(handoffSimSites, pReason, pAnswer, pReasonSlow, pAnswerSlow, o.reasoningTokens, o.contentTokens, tps)
		relaySrc += fmt.Sprintf(handoffRelaySite, pHandoff, pReason, pAnswer, pReasonSlow, pAnswerSlow)
	}
	if o.resume {
		relaySrc += fmt.Sprintf(resumeSites, pResumeOn, pResumeOff, pSim)
	}
	proxySrc := head + fmt.Sprintf(proxySites, pProxy, pSim)
	if o.trace {
		traceEnv()
		relaySrc += fmt.Sprintf(traceRelaySite, pRelayTrace, relayBlock(pSim))
		proxySrc += fmt.Sprintf(traceProxySite, pProxyTrace, pSim)
	}
	files := []struct{ name, src string }{
		{"sim", simSrc},
		{"relay", relaySrc},
		{"reverse_proxy", proxySrc},
	}
	if o.stateRedis {
		sock, err := startRedis(dir)
		if err != nil {
			return siteURLs{}, err
		}
		files = append(files,
			struct{ name, src string }{"relay-local", head + fmt.Sprintf(stateSite, pLocal, pSim, "state local")},
			struct{ name, src string }{"relay-redis", head + fmt.Sprintf(stateSite, pRedis, pSim, "state redis unix:"+sock)})
	}
	if o.printConfig {
		for _, f := range files {
			fmt.Printf("# %s process\n%s\n", f.name, f.src)
		}
		os.Exit(0)
	}
	procs := make([]*proc, len(files))
	for i, f := range files {
		cfg, err := inproc.Adapt(f.src, f.name+".Caddyfile", os.Stderr)
		if err != nil {
			stopProcs()
			return siteURLs{}, err
		}
		if procs[i], err = startProc(f.name, cfg, dir); err != nil {
			stopProcs()
			return siteURLs{}, err
		}
	}
	base := func(p int) string { return fmt.Sprintf("http://127.0.0.1:%d", p) }
	sites := siteURLs{
		sim: base(pSim), relay: base(pRelay), proxy: base(pProxy), shadowed: base(pShadowed), claude: base(pClaude),
		simProc: procs[0], relayProc: procs[1], proxyProc: procs[2],
		handoff: base(pHandoff), resumeOn: base(pResumeOn), resumeOff: base(pResumeOff),
		relayTrace: base(pRelayTrace), proxyTrace: base(pProxyTrace),
	}
	if o.stateRedis {
		sites.local, sites.redis, sites.localProc, sites.redisProc = base(pLocal), base(pRedis), procs[3], procs[4]
	}
	return sites, nil
}

// startRedis starts a redis-server (Debian's redis-server package) on a
// unix socket in dir, without persistence, for -state-redis; it is
// stopped with the other processes. It returns the socket's path.
func startRedis(dir string) (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("-state-redis needs redis-server (Debian: apt-get install redis-server): %w", err)
	}
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting redis-server: %w", err)
	}
	procsMu.Lock()
	others = append(others, cmd)
	procsMu.Unlock()
	for range 100 {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return sock, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("redis-server did not listen on %s within 5s", sock)
}

// proc is one child process: a Caddy running one config, which answers
// on its stdout what it is asked on its stdin ("cpu", "mem"; see
// runChild), and stops when its stdin closes.
type proc struct {
	name string
	log  string // its stderr: Caddy's log (JSON lines)
	cmd  *exec.Cmd
	mu   sync.Mutex
	in   io.WriteCloser
	out  *bufio.Reader
}

var (
	procsMu sync.Mutex
	running []*proc
	others  []*exec.Cmd // not Caddy (redis-server): killed at the end
)

// startProc starts this binary as a child that loads cfg, and waits until
// it has loaded it.
func startProc(name string, cfg []byte, dir string) (*proc, error) {
	cfgPath := filepath.Join(dir, name+".json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-child", cfgPath)
	cmd.Stderr = logFile
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s process: %w", name, err)
	}
	p := &proc{name: name, log: logFile.Name(), cmd: cmd, in: in, out: bufio.NewReader(out)}
	procsMu.Lock()
	running = append(running, p)
	procsMu.Unlock()
	if _, err := p.ask("ready"); err != nil {
		return nil, fmt.Errorf("the %s process did not start (see %s): %w", name, logFile.Name(), err)
	}
	return p, nil
}

// ask sends one command to the child and returns its one-line answer.
func (p *proc) ask(cmd string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := fmt.Fprintln(p.in, cmd); err != nil {
		return "", err
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSpace(line)
	if msg, ok := strings.CutPrefix(line, "error "); ok {
		return "", fmt.Errorf("%s", msg)
	}
	return line, nil
}

// askInt asks for a number.
func (p *proc) askInt(cmd string) int64 {
	s, err := p.ask(cmd)
	if err != nil {
		fatalf("asking the %s process for %s: %v", p.name, cmd, err)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		fatalf("the %s process answered %q to %s", p.name, s, cmd)
	}
	return n
}

// cpu is the CPU time (user and system) the child has used so far.
func (p *proc) cpu() time.Duration { return time.Duration(p.askInt("cpu")) }

// syscalls is the number of read and write system calls the child has
// made so far (0 where the system does not tell).
func (p *proc) syscalls() int64 { return p.askInt("syscalls") }

// runWait is the time the child's threads have waited for a CPU so far.
func (p *proc) runWait() time.Duration { return time.Duration(p.askInt("runwait")) }

// mem is the child's heap and goroutine stacks in use, after a collection.
func (p *proc) mem() int64 { return p.askInt("mem") }

// stopProcs stops every child; it is safe to call more than once.
func stopProcs() {
	procsMu.Lock()
	ps := running
	running = nil
	procsMu.Unlock()
	for _, p := range ps {
		_ = p.in.Close() // the child stops its Caddy and exits
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	}
	procsMu.Lock()
	cs := others
	others = nil
	procsMu.Unlock()
	for _, c := range cs {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
}
