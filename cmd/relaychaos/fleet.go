package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmrelay/caddy-llm-relay/cmd/internal/inproc"
	"github.com/llmrelay/caddy-llm-relay/internal/chaos"
)

// The fleet cases (internal/chaos's RedisCases): a redis-server and two
// relay instances A and B on it, each this binary started again as a
// process of its own (-peer: its own data directory, so its own instance
// ID), in front of a gate upstream in this process that holds the
// requests of model hold until told and answers model fast at once.
// They run while the chaos load does, and touch nothing of it. For each
// case: plant, let both instances read it, then check a key's
// max_concurrent and rpm across the two and that the shared state is up.
// Without redis-server the cases are skipped, unless RELAY_REQUIRE_REDIS=1
// (as in the fleet e2e tests).

const (
	fleetConc     = 3  // max_concurrent of each case's conc key
	fleetHeld     = 2  // requests A holds while B tries
	fleetTries    = 4  // requests B tries at once
	fleetRPM      = 30 // rpm of each case's rpm key
	fleetRPMTaken = 20 // requests A takes of it first
	fleetSync     = 250 * time.Millisecond
	fleetWait     = 15 * time.Second // bound of every wait (a loaded machine starts Caddy slowly)
	fleetBudget   = 90 * time.Second // bound of the whole fleet part
)

// fleetRow is one case's outcome.
type fleetRow struct {
	name, conc, rpm, state string
	why                    []string
}

// fleetOutcome is the fleet part's outcome.
type fleetOutcome struct {
	skipped string // why it did not run
	redis   string // redis-server's version
	rows    []fleetRow
	edge    edgeRow  // the resume-edge-kill case
	failed  []string // what went wrong outside a case's checks
	logs    []string // the relays' own lines, when a case failed
	took    time.Duration
}

// fleetCaseKeys names a case's key names in the peers' config.
func fleetCaseKeys(c chaos.RedisCase) chaos.RedisKeys {
	name := strings.TrimPrefix(c.Name, "redis-")
	return chaos.RedisKeys{Prefix: "llm_relay:", Conc: "conc-" + name, RPM: "rpm-" + name, Other: "other",
		Day: time.Now().UTC().Format("2006-01-02")}
}

// runFleet runs the fleet cases rcs; it never takes more than
// fleetBudget.
func runFleet(rcs []chaos.RedisCase) (out fleetOutcome) {
	start := time.Now()
	defer func() { out.took = time.Since(start) }()
	if len(rcs) == 0 {
		out.skipped = "no fleet case selected"
		return out
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("RELAY_REQUIRE_REDIS") == "1" {
			out.failed = append(out.failed, "redis-server not installed (RELAY_REQUIRE_REDIS=1)")
			return out
		}
		out.skipped = "redis-server not installed (Debian: apt-get install redis-server; RELAY_REQUIRE_REDIS=1 makes this a failure)"
		return out
	}
	fr, err := startFleet(bin, rcs)
	if fr != nil {
		defer fr.close()
		out.redis = fr.version
	}
	if err != nil {
		out.failed = append(out.failed, "starting the fleet: "+err.Error())
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), fleetBudget)
	defer cancel()
	for _, c := range rcs {
		row := fr.runCase(ctx, c)
		out.rows = append(out.rows, row)
	}
	// Last: it kills A.
	out.edge = fr.runEdgeKill(ctx)
	if out.failedCases() > 0 || len(out.edge.why) > 0 {
		for _, p := range fr.peers {
			out.logs = append(out.logs, p.warnings()...)
		}
	}
	return out
}

func (o fleetOutcome) failedCases() int {
	n := 0
	for _, r := range o.rows {
		if len(r.why) > 0 {
			n++
		}
	}
	return n
}

// fleetRun is a running fleet: redis-server, the gate, A and B.
type fleetRun struct {
	dir     string
	sock    string
	version string
	server  *exec.Cmd
	rc      *redis.Client
	gate    *gate
	gateSrv *http.Server
	peers   [2]*peer // A, B
	client  *http.Client
}

func startFleet(bin string, rcs []chaos.RedisCase) (*fleetRun, error) {
	dir, err := os.MkdirTemp("", "relaychaos-fleet-")
	if err != nil {
		return nil, err
	}
	fr := &fleetRun{dir: dir, sock: filepath.Join(dir, "redis.sock"), gate: newGate(),
		client: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}, Timeout: fleetWait}}
	if out, err := exec.Command(bin, "--version").Output(); err == nil {
		fr.version = strings.TrimSpace(string(out))
	}
	fr.server = exec.Command(bin, "--port", "0", "--unixsocket", fr.sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning")
	if err := fr.server.Start(); err != nil {
		return fr, fmt.Errorf("redis-server: %w", err)
	}
	fr.rc = redis.NewClient(&redis.Options{Network: "unix", Addr: fr.sock, MaxRetries: -1})
	if err := waitUntil(fleetWait, func() bool { return fr.rc.Ping(context.Background()).Err() == nil }); err != nil {
		return fr, fmt.Errorf("redis-server not answering: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fr, err
	}
	fr.gateSrv = &http.Server{Handler: fr.gate, ReadHeaderTimeout: 10 * time.Second, ErrorLog: discardLog()}
	go func() { _ = fr.gateSrv.Serve(ln) }()
	gatePort := ln.Addr().(*net.TCPAddr).Port

	pp, err := inproc.FreePorts(2)
	if err != nil {
		return fr, err
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, name := range []string{"A", "B"} {
		p := &peer{name: name, dir: filepath.Join(dir, name), port: pp[i]}
		fr.peers[i] = p
		wg.Go(func() { errs[i] = p.start(peerCaddyfile(p, gatePort, fr.sock, rcs)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fr, err
	}
	for _, p := range fr.peers {
		st, err := fr.state(p)
		if err != nil {
			return fr, err
		}
		p.id = st.Instance
	}
	if fr.peers[0].id == fr.peers[1].id {
		return fr, fmt.Errorf("A and B have the same instance ID %s", fr.peers[0].id)
	}
	return fr, nil
}

func (fr *fleetRun) close() {
	for _, p := range fr.peers {
		if p != nil {
			p.stop()
		}
	}
	fr.gate.releaseAll()
	if fr.gateSrv != nil {
		_ = fr.gateSrv.Close()
	}
	if fr.rc != nil {
		_ = fr.rc.Close()
	}
	if fr.server != nil && fr.server.Process != nil {
		_ = fr.server.Process.Kill()
		_ = fr.server.Wait()
	}
	fr.client.CloseIdleConnections()
	_ = os.RemoveAll(fr.dir)
}

// peerCaddyfile is a peer's config: for each case a key with
// max_concurrent and one with rpm, and a key "other" whose limits the
// wrong-typed keys case spoils.
func peerCaddyfile(p *peer, gatePort int, sock string, rcs []chaos.RedisCase) string {
	var keys strings.Builder
	for _, c := range rcs {
		k := fleetCaseKeys(c)
		fmt.Fprintf(&keys, "\t\tkey sk-%[1]s %[1]s {\n\t\t\tmax_concurrent %[2]d\n\t\t}\n", k.Conc, fleetConc)
		fmt.Fprintf(&keys, "\t\tkey sk-%[1]s %[1]s {\n\t\t\trpm %[2]d\n\t\t}\n", k.RPM, fleetRPM)
	}
	return fmt.Sprintf(`{
	admin off
	persist_config off
	auto_https off
	skip_install_trust
	default_bind 127.0.0.1
	storage file_system %[1]s
	log {
		output file %[2]s
		format json
		level WARN
	}
}

http://127.0.0.1:%[3]d {
	bind 127.0.0.1
	llm_relay {
		upstream gate http://127.0.0.1:%[4]d/%[5]s/v1
%[6]s		key sk-other other {
			rpm 1000
		}
		key %[9]s edge
		model slow {
			to gate slow
		}
		resume {
			ttl 1m
			coalesce off
		}
		model hold {
			to gate hold
		}
		model fast {
			to gate fast
		}
		state redis unix:%[7]s {
			sync_interval %[8]s
		}
	}
	handle /status {
		llm_relay_status
	}
}
`, filepath.Join(p.dir, "storage"), p.log(), p.port, gatePort, p.name, keys.String(), sock, fleetSync, edgeKey)
}

// peer is a relay instance in a process of its own.
type peer struct {
	name string
	dir  string
	port int
	id   string // its instance ID
	cmd  *exec.Cmd
	in   io.WriteCloser // its stdin: closed, the peer stops
}

func (p *peer) base() string { return "http://127.0.0.1:" + strconv.Itoa(p.port) }
func (p *peer) log() string  { return filepath.Join(p.dir, "caddy.log") }

func (p *peer) start(caddyfile string) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(p.dir, "Caddyfile"), []byte(caddyfile), 0o600); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	stderr, err := os.Create(filepath.Join(p.dir, "stderr.log"))
	if err != nil {
		return err
	}
	defer stderr.Close() // the child has its own copy
	p.cmd = exec.Command(self, "-peer", p.dir)
	p.cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+filepath.Join(p.dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(p.dir, "config"))
	p.cmd.Stdout, p.cmd.Stderr = nil, stderr
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		return err
	}
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("peer %s: %w", p.name, err)
	}
	err = waitUntil(fleetWait, func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.port), 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if err != nil {
		b, _ := os.ReadFile(filepath.Join(p.dir, "stderr.log"))
		return fmt.Errorf("peer %s not listening: %w\n%s", p.name, err, b)
	}
	return nil
}

// stop closes the peer's stdin, which stops it, and waits for it.
func (p *peer) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.in.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// warnings are the relay's WARN lines in the peer's log, for a failure.
func (p *peer) warnings() []string {
	f, err := os.Open(p.log())
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() && len(out) < 20 {
		if l := sc.Text(); strings.Contains(l, `"logger":"http.handlers.llm_relay"`) {
			out = append(out, "peer "+p.name+": "+l)
		}
	}
	return out
}

// runPeer is the -peer mode: a Caddy from dir's Caddyfile, until stdin
// closes (the suite stopped it, or ended without doing so).
func runPeer(dir string) int {
	src, err := os.ReadFile(filepath.Join(dir, "Caddyfile"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg, err := inproc.Adapt(string(src), "peer.Caddyfile", os.Stderr)
	if err == nil {
		err = caddy.Load(cfg, true)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := caddy.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// gate is the peers' upstream: model hold waits until released, model
// fast answers at once. Each peer has its own path prefix (/A/v1, /B/v1),
// so the gate counts each one's requests held.
type gate struct {
	mu      sync.Mutex
	slow    map[string]int // model slow's requests, by peer
	held    map[string]int
	release chan struct{}
}

func newGate() *gate {
	return &gate{held: map[string]int{}, slow: map[string]int{}, release: make(chan struct{})}
}

const gateAnswer = `{"id":"g","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	who, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	var body struct {
		Model string `json:"model"`
	}
	_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body)
	if body.Model == "slow" {
		g.stream(w, r, who)
		return
	}
	if body.Model == "hold" {
		g.mu.Lock()
		g.held[who]++
		release := g.release
		g.mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		case <-time.After(fleetWait):
		}
		g.mu.Lock()
		g.held[who]--
		g.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, gateAnswer)
}

// heldBy is how many requests of peer who the gate holds.
func (g *gate) heldBy(who string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held[who]
}

// releaseAll lets every held request go; later ones are held again.
func (g *gate) releaseAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.release)
	g.release = make(chan struct{})
}

// peerState is a peer's status view's state object.
type peerState struct {
	Instance  string `json:"instance"`
	Up        *bool  `json:"up"`
	LastError string `json:"last_error"`
	Problems  []struct {
		Key string `json:"key"`
	} `json:"problems"`
}

func (fr *fleetRun) state(p *peer) (peerState, error) {
	var st struct {
		State peerState `json:"state"`
	}
	resp, err := fr.client.Get(p.base() + "/status")
	if err != nil {
		return st.State, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st.State, fmt.Errorf("peer %s status: %w", p.name, err)
	}
	return st.State, nil
}

// chat sends one chat completion with key and model to p; it returns
// the status (0 with an error).
func (fr *fleetRun) chat(p *peer, key, model string) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, p.base()+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-"+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := fr.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// field reads p's figures of key name's limits in Redis: requests taken
// and in flight.
func (fr *fleetRun) field(ctx context.Context, p *peer, name string) (raw string, req, inFlight int64) {
	raw, _ = fr.rc.HGet(ctx, "llm_relay:limits:"+name, p.id).Result()
	var tok, at int64
	_, _ = fmt.Sscan(raw, &req, &tok, &inFlight, &at)
	return raw, req, inFlight
}

// rounds waits until p has written key name's figures n more times: the
// first of those round trips read what Redis held at the call, and the
// next began once p had applied it.
func (fr *fleetRun) rounds(ctx context.Context, p *peer, name string, n int) error {
	last, _, _ := fr.field(ctx, p, name)
	for range n {
		err := waitUntil(fleetWait, func() bool {
			v, _, _ := fr.field(ctx, p, name)
			if v != "" && v != last {
				last = v
				return true
			}
			return false
		})
		if err != nil {
			return fmt.Errorf("peer %s did not write its figures of %s: %w", p.name, name, err)
		}
	}
	return nil
}

// both waits for two rounds of each peer.
func (fr *fleetRun) both(ctx context.Context, name string) error {
	for _, p := range fr.peers {
		if err := fr.rounds(ctx, p, name, 2); err != nil {
			return err
		}
	}
	return nil
}

// plant runs cmds in one transaction.
func (fr *fleetRun) plant(ctx context.Context, cmds [][]any) error {
	_, err := fr.rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range cmds {
			p.Do(ctx, c...)
		}
		return nil
	})
	return err
}

// runCase plants c and checks the limits and the state.
func (fr *fleetRun) runCase(ctx context.Context, c chaos.RedisCase) fleetRow {
	row := fleetRow{name: c.Name, conc: "-", rpm: "-", state: "-"}
	fail := func(why string) fleetRow {
		row.why = append(row.why, why)
		return row
	}
	k := fleetCaseKeys(c)
	if err := fr.plant(ctx, c.Plant(k, time.Now())); err != nil {
		return fail("planting: " + err.Error())
	}
	if err := fr.both(ctx, k.Conc); err != nil {
		return fail(err.Error())
	}
	if c.Then != nil {
		if err := fr.plant(ctx, c.Then(k, time.Now())); err != nil {
			return fail("planting: " + err.Error())
		}
		if err := fr.both(ctx, k.Conc); err != nil {
			return fail(err.Error())
		}
	}
	var why string
	row.conc, why = fr.checkConcurrency(ctx, k.Conc)
	if why != "" {
		row.why = append(row.why, why)
	}
	row.rpm, why = fr.checkRPM(ctx, k.RPM)
	if why != "" {
		row.why = append(row.why, why)
	}
	var states []string
	for _, p := range fr.peers {
		st, err := fr.state(p)
		switch {
		case err != nil:
			row.why = append(row.why, err.Error())
		case st.Up == nil || !*st.Up:
			states = append(states, p.name+" down")
			row.why = append(row.why, fmt.Sprintf("peer %s: shared state down while redis-server is up (last_error %q)", p.name, st.LastError))
		default:
			states = append(states, fmt.Sprintf("%s up, %d named", p.name, len(st.Problems)))
		}
	}
	row.state = strings.Join(states, "; ")
	return row
}

// checkConcurrency: A holds fleetHeld requests of key name; once B has
// read that, B tries fleetTries at once.
func (fr *fleetRun) checkConcurrency(ctx context.Context, name string) (string, string) {
	a, b := fr.peers[0], fr.peers[1]
	var wg sync.WaitGroup
	defer func() {
		fr.gate.releaseAll()
		wg.Wait()
	}()
	var mu sync.Mutex
	refused := map[string]int{}
	var errs []string
	send := func(p *peer, n int) {
		for range n {
			wg.Go(func() {
				st, err := fr.chat(p, name, "hold")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					errs = append(errs, err.Error())
				case st == http.StatusTooManyRequests:
					refused[p.name]++
				case st != http.StatusOK:
					errs = append(errs, fmt.Sprintf("peer %s: status %d", p.name, st))
				}
			})
		}
	}
	settled := func(p *peer, n int) (held int, err error) {
		err = waitUntil(fleetWait, func() bool {
			mu.Lock()
			defer mu.Unlock()
			held = fr.gate.heldBy(p.name)
			return held+refused[p.name] >= n || len(errs) > 0
		})
		mu.Lock()
		defer mu.Unlock()
		if len(errs) > 0 {
			return held, errors.New(errs[0])
		}
		return held, err
	}
	send(a, fleetHeld)
	held, err := settled(a, fleetHeld)
	if err != nil {
		return "-", "max_concurrent: A's requests: " + err.Error()
	}
	if held < fleetHeld {
		return fmt.Sprintf("A admitted %d of %d", held, fleetHeld),
			fmt.Sprintf("max_concurrent %d held shut: A admitted %d of its first %d", fleetConc, held, fleetHeld)
	}
	err = waitUntil(fleetWait, func() bool { _, _, n := fr.field(ctx, a, name); return n == fleetHeld })
	if err == nil {
		err = fr.rounds(ctx, b, name, 2)
	}
	if err != nil {
		return "-", "max_concurrent: " + err.Error()
	}
	send(b, fleetTries)
	admitted, err := settled(b, fleetTries)
	if err != nil {
		return "-", "max_concurrent: B's requests: " + err.Error()
	}
	want := min(max(fleetConc-fleetHeld, 0), fleetTries)
	return fmt.Sprintf("B admitted %d (want %d)", admitted, want), chaos.CheckConcurrency(fleetConc, fleetHeld, fleetTries, admitted)
}

// checkRPM: A takes fleetRPMTaken of key name's rpm; once B has read
// that, B sends until refused.
func (fr *fleetRun) checkRPM(ctx context.Context, name string) (string, string) {
	a, b := fr.peers[0], fr.peers[1]
	start := time.Now()
	took := 0
	for range fleetRPMTaken {
		st, err := fr.chat(a, name, "fast")
		if err != nil {
			return "-", "rpm: " + err.Error()
		}
		if st == http.StatusOK {
			took++
		}
	}
	err := waitUntil(fleetWait, func() bool { _, n, _ := fr.field(ctx, a, name); return n >= int64(took) })
	if err == nil {
		err = fr.rounds(ctx, b, name, 2)
	}
	if err != nil {
		return "-", "rpm: " + err.Error()
	}
	admitted := 0
	for range fleetRPM {
		st, err := fr.chat(b, name, "fast")
		if err != nil {
			return "-", "rpm: " + err.Error()
		}
		if st != http.StatusOK {
			break
		}
		admitted++
	}
	elapsed := time.Since(start)
	lo, hi := chaos.RPMRange(fleetRPM, fleetRPMTaken, elapsed)
	return fmt.Sprintf("A %d, B %d (want %d..%d)", took, admitted, lo, hi), chaos.CheckRPM(fleetRPM, fleetRPMTaken, took, admitted, elapsed)
}

// waitUntil polls cond every 10ms until it holds or bound passes.
func waitUntil(bound time.Duration, cond func() bool) error {
	end := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(end) {
			return fmt.Errorf("not within %s", bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// reportFleet prints the fleet cases' outcome and returns why the run
// fails because of them.
func reportFleet(w io.Writer, o fleetOutcome) []string {
	fmt.Fprintf(w, "\nfleet on Redis: two relay processes A and B, sync_interval %s; per case a key with max_concurrent %d and one with rpm %d\n",
		fleetSync, fleetConc, fleetRPM)
	if o.skipped != "" {
		fmt.Fprintf(w, "  skipped: %s\n", o.skipped)
		return o.failed
	}
	if o.redis != "" {
		fmt.Fprintf(w, "  %s; the fleet part took %s, beside the load\n", o.redis, o.took.Round(100*time.Millisecond))
	}
	if len(o.rows) > 0 {
		fmt.Fprintf(w, "  %-16s %-38s %-30s %s\n", "case", fmt.Sprintf("max_concurrent (A holds %d; B tries %d)", fleetHeld, fleetTries),
			fmt.Sprintf("rpm (A takes %d, then B)", fleetRPMTaken), "state")
	}
	var why []string
	for _, r := range o.rows {
		verdict := "ok"
		if len(r.why) > 0 {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "  %-16s %-38s %-30s %s: %s\n", r.name, r.conc, r.rpm, r.state, verdict)
		for _, y := range r.why {
			why = append(why, r.name+": "+y)
		}
	}
	why = append(why, reportEdgeKill(w, o.edge)...)
	if len(o.logs) > 0 {
		fmt.Fprintf(w, "  the relays' log lines:\n    %s\n", strings.Join(o.logs, "\n    "))
	}
	return append(why, o.failed...)
}
