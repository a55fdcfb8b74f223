package llmrelay_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Resumable streams (issue 31) with the official clients: the openai npm
// client's Responses streams resumed by starting_after, background
// responses polled, streamed and cancelled (e2e/node/resume-responses.mjs);
// the eventsource npm package reconnecting with Last-Event-ID through a
// proxy that cuts its first connection (e2e/node/resume-eventsource.mjs);
// the openai and Anthropic SDKs reading journaled streams with heartbeats
// (e2e/node/resume-sdks.mjs, and e2e/python/resume_sse.py decoding as the
// Python SDKs do). Codex CLI's retries: resume_codex_e2e_test.go.

// rcSite is the simulator these tests use, on :9130: one handler speaks
// Responses, Chat and Messages; 40 answer tokens at 80 a second make a
// stream of half a second, long enough to be cut and resumed while it
// is still being generated. The text depends on the seed only, so two
// requests with different inputs get the same answer (the tests vary the
// input so that no request re-attaches to another test's stream).
const rcSite = `http://127.0.0.1:9130 {
	handle /slow/* {
		llm_simulator {
			seed 31
			reasoning_tokens 6
			content_tokens 40
			pattern steady 10
		}
	}
	llm_simulator {
		seed 31
		reasoning_tokens 6
		content_tokens 40
		pattern steady 80
	}
}`

// rcRelay reaches the simulator (at sim, its base URL without /v1: the
// simulator itself or a witness proxy in front of it) natively
// (Responses), as Chat and as Anthropic Messages, with resume on: models
// native, via-chat and via-claude take half a second, slow-native, slow
// and slow-claude four; the hb- models are the slow ones with a heartbeat
// every 50ms, so comments fall between the journaled events.
func rcRelay(sim string) string {
	return `llm_relay {
		key sk-rc-a a
		key sk-rc-b b
		upstream native ` + sim + `/v1
		upstream simchat ` + sim + `/v1 {
			api chat
		}
		upstream simanth ` + sim + `/v1 {
			api anthropic
		}
		upstream slownative ` + sim + `/slow/v1
		upstream slowchat ` + sim + `/slow/v1 {
			api chat
		}
		upstream slowanth ` + sim + `/slow/v1 {
			api anthropic
		}
		model native {
			to native sim
		}
		model via-chat {
			to simchat sim
		}
		model via-claude {
			to simanth sim
		}
		model slow-native {
			to slownative sim
		}
		model slow {
			to slowchat sim
		}
		model slow-claude {
			to slowanth sim
		}
		model hb-native {
			to slownative sim
			smoothing off {
				heartbeat 50ms
			}
		}
		model hb-chat {
			to slowchat sim
			smoothing off {
				heartbeat 50ms
			}
		}
		model hb-claude {
			to slowanth sim
			smoothing off {
				heartbeat 50ms
			}
		}
		resume {
			detach 30s
			retry 200ms
		}
	}`
}

// rcSim is the simulator's own base URL.
const rcSim = "http://127.0.0.1:9130"

// rcNode runs an e2e/node script with a bound and returns its one JSON
// line decoded into out. The test is skipped when node or the package
// is missing, and fails then under RELAY_REQUIRE_NODE=1.
func rcNode(t *testing.T, pkg, script string, out any, args ...string) {
	t.Helper()
	requireNodeTool(t, filepath.Join(pkg, "package.json"), "the "+pkg+" Node package")
	if err := rcNodeRun(t.TempDir(), script, out, args...); err != nil {
		t.Fatal(err)
	}
}

// rcNodeRun is rcNode without the test: it may run on a goroutine other
// than the test's (only that one may stop the test), its caller having
// checked the package is there.
func rcNodeRun(home, script string, out any, args ...string) error {
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("e2e/node/node_modules is installed but node is not on PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("e2e", "node", script)}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "NO_COLOR=1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) || ctx.Err() != nil {
		return fmt.Errorf("node %s %v: %v\nstderr: %s", script, args, err, stderr.String())
	}
	if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), out); jerr != nil {
		return fmt.Errorf("node %s %v (%v): output is not one JSON line: %v\nstdout: %s\nstderr: %s", script, args, err, jerr, stdout.String(), stderr.String())
	}
	return nil
}

// rcNonce makes an input no other request sent.
func rcNonce(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + " " + hex.EncodeToString(b[:])
}

// rcNodeError is what the scripts report when the SDK raised.
type rcNodeError struct {
	Name    string `json:"name"`
	Status  int    `json:"status"`
	Message string `json:"message"`
}

// rcEvent is one Responses event as the SDK parsed it.
type rcEvent map[string]any

func (e rcEvent) seq() int {
	f, _ := e["sequence_number"].(float64)
	return int(f)
}

func (e rcEvent) typ() string { s, _ := e["type"].(string); return s }

// rcVolatile are the fields two generations of one answer may differ in:
// the ids minted per response and item, and the times (Chat's "created"
// is in whole seconds, so two streams started together may straddle one).
var rcVolatile = map[string]bool{"id": true, "item_id": true, "created": true, "created_at": true, "completed_at": true, "response_id": true, "call_id": true}

// rcStable is an event without its volatile fields, as JSON.
func rcStable(v any) string {
	var strip func(any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case rcEvent:
			return strip(map[string]any(x))
		case map[string]any:
			m := map[string]any{}
			for k, e := range x {
				if !rcVolatile[k] {
					m[k] = strip(e)
				}
			}
			return m
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = strip(e)
			}
			return out
		}
		return v
	}
	b, _ := json.Marshal(strip(v))
	return string(b)
}

// rcText joins a Responses stream's output_text deltas.
func rcText(events []rcEvent) string {
	var s strings.Builder
	for _, e := range events {
		if e.typ() == "response.output_text.delta" {
			d, _ := e["delta"].(string)
			s.WriteString(d)
		}
	}
	return s.String()
}

// rcSameStream fails unless got is want event for event (volatile fields
// aside), its sequence numbers 0, 1, 2... with no gap and no repeat.
func rcSameStream(t *testing.T, name string, got, want []rcEvent) {
	t.Helper()
	for i, e := range got {
		if e.seq() != i {
			var seqs []int
			for _, e := range got {
				seqs = append(seqs, e.seq())
			}
			t.Errorf("%s: event %d has sequence_number %d; the sequence: %v", name, i, e.seq(), seqs)
			return
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d events, the uninterrupted stream has %d", name, len(got), len(want))
		return
	}
	for i := range want {
		if g, w := rcStable(got[i]), rcStable(want[i]); g != w {
			t.Errorf("%s: event %d differs:\n got %s\nwant %s", name, i, g, w)
			return
		}
	}
}

type rcResponsesRun struct {
	ID     string    `json:"id"`
	Events []rcEvent `json:"events"`
	Cuts   []struct {
		ID     string    `json:"id"`
		Before []rcEvent `json:"before"`
		After  []rcEvent `json:"after"`
		Helper *struct {
			Text   string `json:"text"`
			Status string `json:"status"`
			Events int    `json:"events"`
		} `json:"helper"`
	} `json:"cuts"`
	First *struct {
		Status     string `json:"status"`
		Background bool   `json:"background"`
	} `json:"first"`
	Polls int `json:"polls"`
	Final *struct {
		Status string `json:"status"`
		Text   string `json:"text"`
	} `json:"final"`
	Cancelled *struct {
		Status string `json:"status"`
	} `json:"cancelled"`
	Retrieved *struct {
		Status string `json:"status"`
		Text   string `json:"text"`
	} `json:"retrieved"`
	Error *rcNodeError `json:"error"`
}

func rcResponses(t *testing.T, model, input, mode string, args ...string) rcResponsesRun {
	t.Helper()
	var r rcResponsesRun
	rcNode(t, "openai", "resume-responses.mjs", &r, append([]string{relayBase + "/v1", "sk-rc-a", model, input, mode}, args...)...)
	if r.Error != nil {
		t.Fatalf("%s %s: the SDK raised %+v", model, mode, *r.Error)
	}
	return r
}

// TestResumeResponsesOpenAINode: the openai npm client reads a Responses
// stream for a few events and aborts it (its connection goes away); the
// relay goes on generating (resume detach); the client asks for the rest
// with responses.retrieve(id, {stream: true, starting_after}) and ends up
// with exactly the events of an uninterrupted stream, sequence numbers
// 0..n-1, none missing, none twice, whether the target speaks Responses,
// Chat or Anthropic Messages. The SDK's own resuming helper
// (responses.stream({response_id, starting_after})) completes the same
// answer.
func TestResumeResponsesOpenAINode(t *testing.T) {
	startRelay(t, rcRelay(rcSim), rcSite)
	for _, model := range []string{"native", "via-chat", "via-claude"} {
		r := rcResponses(t, model, rcNonce("hi"), "resume", "1,7,-1")
		whole := r.Events
		if len(whole) < 20 || whole[len(whole)-1].typ() != "response.completed" {
			t.Fatalf("%s: the uninterrupted stream is short or unfinished: %d events", model, len(whole))
		}
		text := rcText(whole)
		for i, k := range []int{1, 7, len(whole) - 1} {
			c := r.Cuts[i]
			if len(c.Before) != k || c.ID == "" {
				t.Fatalf("%s cut at %d: read %d events before the abort, response id %q", model, k, len(c.Before), c.ID)
			}
			rcSameStream(t, model+" cut at "+strconv.Itoa(k), append(c.Before, c.After...), whole)
			if c.Helper == nil || c.Helper.Text != text || c.Helper.Status != "completed" {
				t.Errorf("%s cut at %d: responses.stream({response_id, starting_after}): %+v; want %q, completed", model, k, c.Helper, text)
			}
		}
	}
}

// rcWantText is the simulator's answer, asked of it directly.
func rcWantText(t *testing.T) string {
	t.Helper()
	resp, err := httpClient.Post("http://127.0.0.1:9130/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"sim","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatalf("asking the simulator: %v", err)
	}
	var c struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if body := readAll(t, resp); json.Unmarshal([]byte(body), &c) != nil || len(c.Choices) != 1 || c.Choices[0].Message.Content == "" {
		t.Fatalf("the simulator answered %d: %s", resp.StatusCode, body)
	}
	return c.Choices[0].Message.Content
}

// TestResumeBackgroundOpenAINode: the openai npm client creates a
// background response (background: true) for each target dialect: it is
// answered at once, in progress; polled with responses.retrieve(id) it
// completes with the whole answer; streamed with retrieve(id, {stream:
// true}) it is the whole stream from sequence_number 0. One cancelled
// with responses.cancel(id) while it runs says cancelled, and so does
// retrieve(id) after, with less than the whole answer; the relay left
// its upstream request then (a witness proxy in front of the simulator
// sees it go), for each target dialect.
func TestResumeBackgroundOpenAINode(t *testing.T) {
	witness := newRCProxy(t, rcSim, 0)
	startRelay(t, rcRelay(witness.URL), rcSite)
	want := rcWantText(t)
	for _, model := range []string{"native", "via-chat", "via-claude"} {
		r := rcResponses(t, model, rcNonce("hi"), "background")
		if r.First == nil || r.First.Status != "in_progress" && r.First.Status != "queued" || !r.First.Background {
			t.Errorf("%s: create answered %+v; want in progress (or queued), background", model, r.First)
		}
		if r.Final == nil || r.Final.Status != "completed" || r.Final.Text != want {
			t.Errorf("%s: polled %d times, the response is %+v; want completed with %q", model, r.Polls, r.Final, want)
		}
		n := len(r.Events)
		if n < 20 || r.Events[n-1].typ() != "response.completed" || rcText(r.Events) != want {
			t.Errorf("%s: the streamed background response has %d events, the last %q, the text %q", model, n, r.Events[max(n-1, 0)].typ(), rcText(r.Events))
		}
		for i, e := range r.Events {
			if e.seq() != i {
				t.Errorf("%s: streamed event %d has sequence_number %d", model, i, e.seq())
				break
			}
		}
	}
	// Cancelled a second into a four-second generation: the relay stops
	// its upstream request (the witness sees the relay leave it before
	// its end).
	for _, model := range []string{"slow-native", "slow", "slow-claude"} {
		before := len(witness.generations(0))
		r := rcResponses(t, model, rcNonce("hi"), "cancel", "1000")
		if r.First == nil || r.First.Status != "in_progress" && r.First.Status != "queued" {
			t.Errorf("%s cancel: create answered %+v", model, r.First)
		}
		if r.Cancelled == nil || r.Cancelled.Status != "cancelled" || r.Retrieved == nil || r.Retrieved.Status != "cancelled" || r.Retrieved.Text == want {
			t.Errorf("%s cancel: responses.cancel answered %+v, retrieve %+v; want cancelled, with less than the whole answer", model, r.Cancelled, r.Retrieved)
		}
		gens := witness.generations(before + 1)[before:]
		if len(gens) != 1 || gens[0].End != "gone" {
			t.Errorf("%s cancel: the simulator saw %v; want one generation the relay left before its end", model, rcSummary(gens))
		}
	}
}

// rcProxy is an HTTP proxy the tests put between two parties: in front of
// the simulator it is a witness of the generations the relay asked for
// (each request, and whether it ran to its end or its client, the relay,
// went away); in front of the relay it cuts the first stream that reaches
// cutAfter events, mid-event, dropping the connection as a broken network
// would (the relay sees its client gone, the client an unfinished body).
type rcProxy struct {
	*httptest.Server
	target   string
	cutAfter int // 0: never cut

	mu   sync.Mutex
	seen []rcSeen
	cut  bool
}

// rcSeen is one request through an rcProxy and how it ended.
type rcSeen struct {
	Method, Path, LastEventID string
	Header                    http.Header
	Body                      string
	Events                    int    // SSE events passed on ("\n\n" seen)
	End                       string // "complete", "cut", "gone" (the client left), "error"
}

func newRCProxy(t *testing.T, target string, cutAfter int) *rcProxy {
	t.Helper()
	p := &rcProxy{target: target, cutAfter: cutAfter}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

func (p *rcProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s := rcSeen{Method: r.Method, Path: r.URL.Path, LastEventID: r.Header.Get("Last-Event-ID"), Header: r.Header.Clone(), Body: string(body)}
	record := func() {
		p.mu.Lock()
		p.seen = append(p.seen, s)
		p.mu.Unlock()
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		s.End = "error"
		record()
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		s.End = "error"
		if r.Context().Err() != nil {
			s.End = "gone"
		}
		record()
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.(http.Flusher).Flush()
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	buf := make([]byte, 32<<10)
	var tail []byte // the last byte written, to see "\n\n" across reads
	for {
		n, rerr := resp.Body.Read(buf)
		chunk := buf[:n]
		for i := 0; i < len(chunk) && sse; i++ {
			if chunk[i] == '\n' && (i > 0 && chunk[i-1] == '\n' || i == 0 && len(tail) > 0 && tail[0] == '\n') {
				s.Events++
				p.mu.Lock()
				cut := p.cutAfter > 0 && !p.cut && s.Events >= p.cutAfter
				if cut {
					p.cut = true
				}
				p.mu.Unlock()
				if cut {
					// Half of what follows goes out: the cut falls inside
					// the next event.
					rest := chunk[i+1:]
					_, _ = w.Write(chunk[:i+1+len(rest)/2])
					w.(http.Flusher).Flush()
					s.End = "cut"
					record()
					panic(http.ErrAbortHandler) // the connection is dropped, not ended
				}
			}
		}
		if n > 0 {
			tail = chunk[n-1:]
			if _, werr := w.Write(chunk); werr != nil {
				s.End = "gone"
				record()
				return
			}
			w.(http.Flusher).Flush()
		}
		if rerr == io.EOF {
			s.End = "complete"
			break
		}
		if rerr != nil {
			s.End = "error"
			if r.Context().Err() != nil {
				s.End = "gone"
			}
			break
		}
	}
	record()
}

// requests returns what went through the proxy so far (a request is
// recorded when it ends).
func (p *rcProxy) requests() []rcSeen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]rcSeen(nil), p.seen...)
}

// generations returns the requests to a conversation endpoint that went
// through the proxy, waiting up to a few seconds for n of them to end.
func (p *rcProxy) generations(n int) []rcSeen {
	var gens []rcSeen
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		gens = gens[:0]
		for _, s := range p.requests() {
			if s.Method == http.MethodPost && (strings.HasSuffix(s.Path, "/chat/completions") || strings.HasSuffix(s.Path, "/messages") || strings.HasSuffix(s.Path, "/responses")) {
				gens = append(gens, s)
			}
		}
		if len(gens) >= n || time.Now().After(deadline) {
			return gens
		}
	}
}

// rcSummary is what a failure message says of proxied requests.
func rcSummary(seen []rcSeen) []string {
	var out []string
	for _, s := range seen {
		out = append(out, s.Method+" "+s.Path+" "+strconv.Itoa(s.Events)+" events, "+s.End)
	}
	return out
}

// canonicalJSON is a JSON text with its objects' keys in order.
func canonicalJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v: %.200s", err, s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

type rcESRun struct {
	Events []struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Data string `json:"data"`
	} `json:"events"`
	Conns []struct {
		Method       string  `json:"method"`
		URL          string  `json:"url"`
		Status       int     `json:"status"`
		LastEventID  *string `json:"lastEventId"`
		EventsBefore int     `json:"eventsBefore"`
	} `json:"conns"`
	Errors    int    `json:"errors"`
	StreamURL string `json:"streamURL"`
	Error     string `json:"error"`
}

// rcESStable is an EventSource run's events as type and data, the data's
// volatile fields aside, and the input's token count: the two runs it
// compares send different inputs (a nonce each, so that neither joins the
// other's stream), whose counts differ by a token or two.
func rcESStable(t *testing.T, r rcESRun) []string {
	var out []string
	for _, e := range r.Events {
		d := e.Data
		var v any
		if json.Unmarshal([]byte(d), &v) == nil {
			d = rcStable(rcDropKey(v, "input_tokens"))
		}
		out = append(out, e.Type+" "+d)
	}
	return out
}

// rcDropKey is v without the named key in any of its objects.
func rcDropKey(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			if k != key {
				m[k] = rcDropKey(e, key)
			}
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = rcDropKey(e, key)
		}
		return out
	}
	return v
}

// TestResumeEventSourceNode: the eventsource npm package follows a Chat
// stream and a Messages stream (each through a target of another dialect
// too) via a proxy that drops its first connection mid-event after five
// events. The package reconnects by itself, after the relay's retry hint,
// with Last-Event-ID: the id of the last whole event it got. Its first
// connection is the conversation's POST (the package's fetch option turns
// its GET into it); the reconnection is its own GET, sent to the
// X-Relay-Stream URL the POST's response announced. The client ends up
// with every event of an uninterrupted stream once, in order, to the end,
// its ids <stream>.1 to <stream>.n.
func TestResumeEventSourceNode(t *testing.T) {
	requireNodeTool(t, filepath.Join("eventsource", "package.json"), "the eventsource Node package")
	witness := newRCProxy(t, rcSim, 0)
	startRelay(t, rcRelay(witness.URL), rcSite)
	for _, tc := range []struct{ dialect, model string }{
		{"chat", "slow"}, {"chat", "slow-claude"}, {"messages", "slow-claude"}, {"messages", "slow-native"},
	} {
		name := tc.dialect + " via " + tc.model
		before := len(witness.generations(0))
		cutter := newRCProxy(t, relayBase, 5)
		var whole, cut rcESRun
		done := make(chan error, 1)
		home := t.TempDir()
		go func() {
			done <- rcNodeRun(home, "resume-eventsource.mjs", &whole, relayBase+"/v1", "sk-rc-a", tc.dialect, tc.model, rcNonce("hi"))
		}()
		rcNode(t, "eventsource", "resume-eventsource.mjs", &cut, cutter.URL+"/v1", "sk-rc-a", tc.dialect, tc.model, rcNonce("hi"))
		if err := <-done; err != nil {
			t.Fatalf("%s: the uninterrupted run: %v", name, err)
		}
		if whole.Error != "" || cut.Error != "" || len(whole.Conns) != 1 {
			t.Fatalf("%s: the uninterrupted run: %s, %d connections; the cut one: %s", name, whole.Error, len(whole.Conns), cut.Error)
		}
		n := len(whole.Events)
		if n < 20 {
			t.Fatalf("%s: the uninterrupted stream has %d events", name, n)
		}
		// The connections: the POST, cut after five events; one GET at the
		// announced stream URL, with the last whole event's id.
		if len(cut.Conns) != 2 || cut.Conns[0].Method != "POST" || cut.Conns[0].LastEventID != nil ||
			cut.Conns[1].Method != "GET" || cut.Conns[1].URL != cut.StreamURL || cut.Conns[1].Status != 200 {
			t.Fatalf("%s: connections %+v; want the POST, then one GET at %s", name, cut.Conns, cut.StreamURL)
		}
		if !strings.HasPrefix(cut.StreamURL, cutter.URL+"/v1/relay/streams/rs_") {
			t.Errorf("%s: the stream URL is %q", name, cut.StreamURL)
		}
		k := cut.Conns[1].EventsBefore
		if k != 5 || cut.Conns[1].LastEventID == nil || *cut.Conns[1].LastEventID != cut.Events[k-1].ID {
			t.Errorf("%s: the reconnection came after %d events with Last-Event-ID %v; want after 5, the fifth's id", name, k, cut.Conns[1].LastEventID)
		}
		if cut.Errors != 1 {
			t.Errorf("%s: the client saw %d errors; want the one cut", name, cut.Errors)
		}
		// Every event once, in order, to the end.
		stream := strings.TrimPrefix(cut.StreamURL, cutter.URL+"/v1/relay/streams/")
		for i, e := range cut.Events {
			if want := stream + "." + strconv.Itoa(i+1); e.ID != want {
				t.Errorf("%s: event %d has id %q; want %q", name, i, e.ID, want)
				break
			}
		}
		if got, want := rcESStable(t, cut), rcESStable(t, whole); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: the resumed client's events differ from an uninterrupted stream's:\n got %d: %s\nwant %d: %s", name, len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
		}
		// And one generation each: the reconnection was served from the
		// journal.
		if gens := witness.generations(before + 2)[before:]; len(gens) != 2 {
			t.Errorf("%s: the simulator saw %v; want two generations (the uninterrupted and the cut stream)", name, rcSummary(gens))
		}
	}
}

// rcWireRun is what e2e/node/resume-sdks.mjs and e2e/python/resume_sse.py
// report: the text the client collected, the number of events it decoded,
// the response's status and stream id, the bytes it was sent, and the
// error it raised, if any.
type rcWireRun struct {
	Text     string          `json:"text"`
	Events   int             `json:"events"`
	Status   int             `json:"status"`
	StreamID string          `json:"streamId"`
	Raw      string          `json:"raw"`
	Error    json.RawMessage `json:"error"`
}

// rcPython runs an e2e/python script with a bound and decodes its one JSON
// line into out; skipped without python3 (failed under
// RELAY_REQUIRE_PYTHON=1).
func rcPython(t *testing.T, script string, out any, args ...string) {
	t.Helper()
	python := requirePython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{filepath.Join("e2e", "python", script)}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "PYTHONDONTWRITEBYTECODE=1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil || ctx.Err() != nil {
		t.Fatalf("python3 %s %v: %v\nstdout: %s\nstderr: %s", script, args, err, stdout.String(), stderr.String())
	}
	if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), out); jerr != nil {
		t.Fatalf("python3 %s %v: output is not one JSON line: %v\nstdout: %s\nstderr: %s", script, args, jerr, stdout.String(), stderr.String())
	}
}

// rcWire reads a journaled stream's raw bytes (LF line ends, as the relay
// writes them) and returns what breaks the wire resume promises, with the
// number of events and of comment lines seen: every event (a block with
// data) carries exactly one id, <stream>.1, <stream>.2, ... in order, the
// stream being the X-Relay-Stream-Id header's; exactly one retry hint,
// retryMS, on the first event and nowhere else; no id or retry in a block
// without data; and, once an id has been sent, no comment line followed by
// a blank line (a Python SDK's decoder dispatches an empty event there
// and fails parsing it). A last block without a blank line after it (a
// comment after the stream's end) is not an event.
func rcWire(raw, stream string, retryMS int) (problems []string, events, comments int) {
	bad := func(f string, a ...any) { problems = append(problems, fmt.Sprintf(f, a...)) }
	if raw == "" {
		return []string{"no bytes"}, 0, 0
	}
	lines := strings.Split(raw, "\n")
	if partial := lines[len(lines)-1]; partial != "" {
		bad("the stream ends inside a line: %q", partial)
	}
	lines = lines[:len(lines)-1] // whole lines
	idSeen := false
	var block []string
	for i, line := range lines {
		if strings.HasPrefix(line, ":") {
			comments++
			if idSeen && i+1 < len(lines) && lines[i+1] == "" {
				bad("line %d: the comment %q is followed by a blank line after an id was sent", i+1, line)
			}
		}
		if strings.HasPrefix(line, "id:") {
			idSeen = true
		}
		if line != "" {
			block = append(block, line)
			continue
		}
		if len(block) == 0 {
			bad("line %d: a blank line ends no block", i+1)
			continue
		}
		var ids, retries []string
		data := false
		for _, l := range block {
			switch {
			case strings.HasPrefix(l, "id:"):
				ids = append(ids, strings.TrimPrefix(strings.TrimPrefix(l, "id:"), " "))
			case strings.HasPrefix(l, "retry:"):
				retries = append(retries, strings.TrimPrefix(strings.TrimPrefix(l, "retry:"), " "))
			case strings.HasPrefix(l, "data:"):
				data = true
			}
		}
		block = block[:0]
		if !data {
			if len(ids)+len(retries) > 0 {
				bad("line %d: a block without data has ids %q, retry %q", i, ids, retries)
			}
			continue
		}
		events++
		if len(ids) != 1 {
			bad("event %d (ending line %d) has %d ids: %q", events, i, len(ids), ids)
		} else if want := stream + "." + strconv.Itoa(events); ids[0] != want {
			bad("event %d has the id %q; want %q", events, ids[0], want)
		}
		if events == 1 && (len(retries) != 1 || retries[0] != strconv.Itoa(retryMS)) {
			bad("the first event has retry %q; want one retry: %d", retries, retryMS)
		}
		if events > 1 && len(retries) > 0 {
			bad("event %d has retry %q; only the first should", events, retries)
		}
	}
	for _, l := range block { // after the last blank line: comments only
		if !strings.HasPrefix(l, ":") {
			bad("the stream ends inside an event: %q", block)
			break
		}
	}
	if events == 0 {
		bad("no events")
	}
	return problems, events, comments
}

// TestResumeWireCheck: rcWire finds each fault it looks for (the test
// below relies on it).
func TestResumeWireCheck(t *testing.T) {
	const good = "id: rs_x.1\nretry: 200\ndata: {}\n\n: keep-alive\nid: rs_x.2\ndata: {}\n\n: keep-alive\n: cost 1\nid: rs_x.3\ndata: [DONE]\n\n: cost 2\n"
	if p, n, c := rcWire(good, "rs_x", 200); len(p) != 0 || n != 3 || c != 4 {
		t.Fatalf("a good stream: %q, %d events, %d comments", p, n, c)
	}
	for name, raw := range map[string]string{
		"blank after comment": "id: rs_x.1\nretry: 200\ndata: {}\n\n: keep-alive\n\nid: rs_x.2\ndata: {}\n\n",
		"two ids":             "id: rs_x.1\nretry: 200\ndata: {}\n\nid: up-7\nid: rs_x.2\ndata: {}\n\n",
		"no id":               "id: rs_x.1\nretry: 200\ndata: {}\n\ndata: {}\n\n",
		"ids out of order":    "id: rs_x.2\nretry: 200\ndata: {}\n\nid: rs_x.1\ndata: {}\n\n",
		"another stream":      "id: rs_y.1\nretry: 200\ndata: {}\n\n",
		"no retry":            "id: rs_x.1\ndata: {}\n\n",
		"retry again":         "id: rs_x.1\nretry: 200\ndata: {}\n\nid: rs_x.2\nretry: 200\ndata: {}\n\n",
		"retry off the first": "id: rs_x.1\ndata: {}\n\nid: rs_x.2\nretry: 200\ndata: {}\n\n",
		"id-only block":       "id: rs_x.1\nretry: 200\ndata: {}\n\nid: rs_x.2\n\n",
		"cut short":           "id: rs_x.1\nretry: 200\ndata: {}\n\nid: rs_x.2\ndata: {",
		"cut at a line end":   "id: rs_x.1\nretry: 200\ndata: {}\n\nid: rs_x.2\ndata: {}\n",
		"blank after the end": "id: rs_x.1\nretry: 200\ndata: {}\n\n: cost 1\n\n",
	} {
		if p, _, _ := rcWire(raw, "rs_x", 200); len(p) == 0 {
			t.Errorf("%s: no problem found in %q", name, raw)
		}
	}
}

// TestResumeSDKWire: with resume on and a heartbeat every 50ms (four-second
// generations, so comments fall between the journaled events), the
// official openai Node SDK reads a Chat stream and the Anthropic Node SDK
// a Messages stream, each through a target of either dialect, and a
// Python standard-library client that decodes as the Python SDKs do
// (e2e/python/resume_sse.py) reads both: each parses its stream without
// error and collects exactly the simulator's answer, and the bytes it was
// sent keep the wire's promises (rcWire): one id per event, in order; the
// retry hint once, on the first event; no comment followed by a blank
// line once ids are on (docs/resume.md, "Comments"), which the Python
// decoder would turn into an empty event and fail on. The Python client
// is first shown to fail on a stream with such a blank line, so that its
// passing means something.
func TestResumeSDKWire(t *testing.T) {
	witness := newRCProxy(t, rcSim, 0)
	startRelay(t, rcRelay(witness.URL), rcSite)
	want := rcWantText(t)
	t.Run("python decodes as the SDKs", func(t *testing.T) {
		requirePython(t)
		for _, tc := range []struct {
			name, gap string
			fails     bool
		}{{"blank line after a comment", ": keep-alive\n\n", true}, {"comment in the next block", ": keep-alive\n", false}} {
			stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "id: rs_x.1\nretry: 200\ndata: "+`{"choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n"+tc.gap+"id: rs_x.2\ndata: [DONE]\n\n")
			}))
			var r rcWireRun
			rcPython(t, "resume_sse.py", &r, stub.URL, "sk", "chat", "m", "hi")
			stub.Close()
			if failed := len(r.Error) > 0; failed != tc.fails || !tc.fails && r.Text != "hi" {
				t.Errorf("%s: the client reported %s, the text %q; want it to fail: %v", tc.name, r.Error, r.Text, tc.fails)
			}
		}
	})
	for _, tc := range []struct{ client, dialect, model string }{
		{"node", "chat", "hb-chat"}, {"node", "chat", "hb-claude"},
		{"node", "messages", "hb-claude"}, {"node", "messages", "hb-chat"},
		{"python", "chat", "hb-chat"}, {"python", "chat", "hb-claude"},
		{"python", "messages", "hb-claude"}, {"python", "messages", "hb-chat"},
	} {
		t.Run(tc.client+" "+tc.dialect+" via "+tc.model, func(t *testing.T) {
			t.Parallel()
			var r rcWireRun
			if tc.client == "node" {
				pkg := map[string]string{"chat": "openai", "messages": filepath.Join("@anthropic-ai", "sdk")}[tc.dialect]
				rcNode(t, pkg, "resume-sdks.mjs", &r, relayBase, "sk-rc-a", tc.dialect, tc.model, rcNonce("hi"))
			} else {
				rcPython(t, "resume_sse.py", &r, relayBase, "sk-rc-a", tc.dialect, tc.model, rcNonce("hi"))
			}
			if len(r.Error) > 0 || r.Status != http.StatusOK {
				t.Errorf("the client raised %s (status %d), after %d events", r.Error, r.Status, r.Events)
			}
			if r.Text != want {
				t.Errorf("the client collected %q; the simulator's answer is %q", r.Text, want)
			}
			if !strings.HasPrefix(r.StreamID, "rs_") {
				t.Fatalf("X-Relay-Stream-Id is %q", r.StreamID)
			}
			problems, events, comments := rcWire(r.Raw, r.StreamID, 200)
			for _, p := range problems {
				t.Error(p)
			}
			// Heartbeats ran between the events (else the comment rule was
			// not tried): a four-second stream at one every 50ms of
			// silence has dozens.
			if events < 20 || comments < 10 {
				t.Errorf("%d events and %d comment lines; want a stream with heartbeats between its events", events, comments)
			}
			t.Logf("%d events, %d comment lines, %d bytes, the client decoded %d", events, comments, len(r.Raw), r.Events)
			if t.Failed() {
				t.Logf("the raw stream:\n%s", r.Raw)
			}
		})
	}
}
