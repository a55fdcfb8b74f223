package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"

	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile" // registers the caddyfile adapter
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/llmrelay/caddy-llm-relay"
	"github.com/llmrelay/caddy-llm-relay/cmd/internal/inproc"
	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

// caddyfile returns the Caddy config: one relay site on 127.0.0.1:port in
// front of the trace upstream on 127.0.0.1:upPort. Admin is off and
// nothing is written to disk; logs at ERROR only.
func caddyfile(o options, port, upPort int) string {
	var smoothing string
	if o.mode != "off" {
		smoothing = fmt.Sprintf(`
		smoothing %s {
			max_delay %s
			reasoning_max_delay %s
			min_interval %s
		}`, o.mode, o.maxDelay, o.reasoningMaxDelay, o.minInterval)
	}
	// The tagged traces go to the same server through an upstream that
	// parses their inline reasoning, one alias per trace.
	var tagged string
	if o.tagged {
		tagged = fmt.Sprintf(`
		upstream traces_tagged http://127.0.0.1:%d/v1 {
			reasoning_format tags
		}`, upPort)
		for _, t := range traces.All() {
			if t.Tagged {
				tagged += fmt.Sprintf(`
		model %s {
			to traces_tagged %s
		}`, t.Name, t.Name)
			}
		}
	}
	return fmt.Sprintf(`{
	admin off
	persist_config off
	auto_https off
	skip_install_trust
	default_bind 127.0.0.1
	grace_period 2s
	log {
		output stderr
		level ERROR
	}
}

http://127.0.0.1:%d {
	bind 127.0.0.1
	llm_relay {
		upstream traces http://127.0.0.1:%d/v1%s
		model * {
			to traces
		}%s
	}
}
`, port, upPort, tagged, smoothing)
}

// startCaddy adapts and loads the config on a free port and returns the
// relay's base URL.
func startCaddy(o options, upPort int, logw io.Writer) (string, error) {
	ports, err := inproc.FreePorts(1)
	if err != nil {
		return "", err
	}
	port := ports[0]
	src := caddyfile(o, port, upPort)
	cfg, err := inproc.Adapt(src, "smoothreport.Caddyfile", logw)
	if err != nil {
		return "", err
	}
	if err := caddy.Load(cfg, true); err != nil {
		return "", fmt.Errorf("loading the config: %w\n%s", err, src)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", port), nil
}

// stopCaddy stops the running config.
func stopCaddy(logw io.Writer) {
	if err := caddy.Stop(); err != nil {
		fmt.Fprintf(logw, "smoothreport: stopping Caddy: %v\n", err)
	}
}

// upstream serves traces.Handler() on 127.0.0.1 and stamps when each
// replay wrote its steps.
type upstream struct {
	port int
	srv  *http.Server
	h    http.Handler

	mu   sync.Mutex
	runs map[string]*upstreamRun // by trace name, the latest request
}

// upstreamRun is what the upstream did for one request.
type upstreamRun struct {
	mu     sync.Mutex
	writes []time.Time // when each step's write began
	done   chan struct{}
}

func (r *upstreamRun) stamps() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.writes...)
}

func startUpstream() (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("upstream listener: %w", err)
	}
	u := &upstream{port: ln.Addr().(*net.TCPAddr).Port, h: traces.Handler(), runs: map[string]*upstreamRun{}}
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

func (u *upstream) close() { _ = u.srv.Close() }

// run returns the run of the latest request for a trace, or nil.
func (u *upstream) run(name string) *upstreamRun {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[name]
}

// ServeHTTP notes the request's trace, then lets traces.Handler() answer
// through a ResponseWriter that stamps each step's write.
func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		u.h.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &req)
	run := &upstreamRun{done: make(chan struct{})}
	defer close(run.done)
	u.mu.Lock()
	u.runs[req.Model] = run
	u.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	u.h.ServeHTTP(&stampWriter{ResponseWriter: w, run: run}, r)
}

// stampWriter records when each step's bytes were handed to the
// connection: the time of the first Write after a flush (the trace server
// writes each step with one Write and then flushes). Stamping before the
// write, not after the flush, keeps the client from receiving an event
// "before" it was sent.
type stampWriter struct {
	http.ResponseWriter
	run     *upstreamRun
	pending bool // written since the last flush
}

func (s *stampWriter) Write(p []byte) (int, error) {
	if !s.pending && len(p) > 0 {
		s.pending = true
		now := time.Now()
		s.run.mu.Lock()
		s.run.writes = append(s.run.writes, now)
		s.run.mu.Unlock()
	}
	return s.ResponseWriter.Write(p)
}

func (s *stampWriter) FlushError() error {
	s.pending = false
	return http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *stampWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
