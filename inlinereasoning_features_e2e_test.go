package llmrelay_test

// Inline reasoning through everything reasoning-aware, end to end through
// a real Caddy (issue 27). Simulators on :9086 write their reasoning into
// content between think tags (reasoning_form tags or tags_unopened), as a
// self-hosted reasoning model behind vLLM without a reasoning parser does;
// the relay is told so per upstream (reasoning_format tags) and must then
// pace that reasoning on its own lane, hide it, hold it to a budget, trace
// it, measure its clusters, estimate its tokens and compare shadows
// without it, exactly as it does a provider's reasoning field (whose tests
// are pacing_e2e_test.go, usage_e2e_test.go, reasoningtrace_e2e_test.go,
// shadow_e2e_test.go and statuspage_browser_e2e_test.go).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

// taggedSims: /paced/ streams like pacedSimSite (seed 11, clustered
// bursts) but with its reasoning inline in <think> tags; /big/ and
// /small/ are usageSims' with their reasoning inline (tags, and
// tags_unopened as DeepSeek-R1 writes it); /bigfields/ is /big/ with its
// reasoning in reasoning_content, as a shadow's primary.
const taggedSims = `http://127.0.0.1:9086 {
	handle /paced/* {
		llm_simulator {
			seed 11
			reasoning_tokens 60
			content_tokens 40
			reasoning_pattern clustered 15 200ms
			content_pattern clustered 10 150ms
			reasoning_form tags
		}
	}
	handle /big/* {
		llm_simulator {
			seed 3
			reasoning_tokens 60
			content_tokens 10
			pattern steady 0
			reasoning_form tags
		}
	}
	handle /small/* {
		llm_simulator {
			seed 4
			reasoning_tokens 3
			content_tokens 10
			pattern steady 0
			reasoning_form tags_unopened
		}
	}
	handle /bigfields/* {
		llm_simulator {
			seed 3
			reasoning_tokens 60
			content_tokens 10
			pattern steady 0
		}
	}
}`

// taggedPacedRelay smooths as pacedRelay does (split-reasoning), in front
// of the tagged /paced/ simulator; tagged-hidden also hides the reasoning.
// The status page is served at /status.
const taggedPacedRelay = `llm_relay {
		key sk-tagged tagged-usage
		upstream tags http://127.0.0.1:9086/paced/v1 {
			api chat
			reasoning_format tags
		}
		smoothing split-reasoning {
			max_delay 400ms
			reasoning_max_delay 1500ms
			min_interval 30ms
			heartbeat 15s
		}
		model tagged-reasoner {
			to tags
		}
		model tagged-hidden {
			to tags
			smoothing split-reasoning {
				reasoning hide
			}
		}
	}
	handle /status {
		llm_relay_status
	}`

// taggedPaced is what /paced/ says, per piece, as the relay should give
// it apart: the reasoning (with the newline the model writes before
// </think>, which stays in the reasoning: see internal/thinktag) and the
// answer.
func taggedPaced() (reasoning string, pieces []string, content string) {
	r, c := pacedPieces()
	return strings.Join(r, "") + "\n", r, strings.Join(c, "")
}

// taggedEvent is one data event of a stream as the client read it.
type taggedEvent struct {
	at        time.Duration // since the request was sent
	reasoning string        // reasoning_content
	content   string
}

// taggedStream is a Chat stream as the client read it.
type taggedStream struct {
	events  []taggedEvent
	raw     string
	usage   json.RawMessage // the usage chunk's
	finish  string
	done    bool
	errCode string
}

func (s taggedStream) reasoning() string {
	var b strings.Builder
	for _, e := range s.events {
		b.WriteString(e.reasoning)
	}
	return b.String()
}

func (s taggedStream) content() string {
	var b strings.Builder
	for _, e := range s.events {
		b.WriteString(e.content)
	}
	return b.String()
}

// streamTagged sends a Chat stream request for model (with include_usage)
// and reads it event by event, noting when each came.
func streamTagged(t *testing.T, model string, header ...string) taggedStream {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, model)
	start := time.Now()
	resp := post(t, body, header...)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: status %d: %s", model, resp.StatusCode, readAll(t, resp))
	}
	var s taggedStream
	var raw strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		raw.WriteString(sc.Text() + "\n")
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if d == "[DONE]" {
			s.done = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
					Reasoning        string `json:"reasoning"`
				} `json:"delta"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage json.RawMessage `json:"usage"`
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("%s: event is not JSON: %q", model, d)
		}
		if c.Error != nil {
			s.errCode = c.Error.Code
		}
		if len(c.Usage) > 0 && string(c.Usage) != "null" {
			s.usage = c.Usage
		}
		e := taggedEvent{at: time.Since(start)}
		for _, ch := range c.Choices {
			e.content += ch.Delta.Content
			e.reasoning += ch.Delta.ReasoningContent + ch.Delta.Reasoning
			if ch.FinishReason != "" {
				s.finish = ch.FinishReason
			}
		}
		s.events = append(s.events, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: reading the stream: %v", model, err)
	}
	s.raw = raw.String()
	return s
}

// noTags fails if what the client got still holds a think tag.
func noTags(t *testing.T, what, s string) {
	t.Helper()
	for _, tag := range []string{"<think>", "</think>", "<think", "think>"} {
		if strings.Contains(s, tag) {
			t.Errorf("%s holds %q: the tags reached the client:\n%s", what, tag, s)
			return
		}
	}
}

// checkNoReasoningDump is TestReasoningDrainsSteadilyWhenAnswerStarts's
// check (internal/pace/drain_test.go) read from the client's side: the
// reasoning still queued when the answer starts leaves over several
// events, never in one. Its bound there, twice an even share of the
// reasoning_drain ticks, is fitted to 100 and more queued runes of
// one-word pieces; here a few dozen runes are queued, in the simulator's
// pieces of up to a dozen runes (CJK, emoji sequences), which one event
// carries whole, so the bound is a third of what was queued: a dump
// carries all of it.
func checkNoReasoningDump(t *testing.T, s taggedStream) {
	t.Helper()
	first := -1
	for i, e := range s.events {
		if e.content != "" {
			first = i
			break
		}
	}
	if first < 0 {
		t.Fatal("no answer text came")
	}
	queued, most, events := 0, 0, 0
	for _, e := range s.events[first:] {
		n := utf8.RuneCountInString(e.reasoning)
		queued += n
		most = max(most, n)
		if n > 0 {
			events++
		}
	}
	t.Logf("%d reasoning runes still queued when the answer started, left in %d events, at most %d in one", queued, events, most)
	if queued >= 24 && most > queued/3 {
		t.Errorf("%d of the %d reasoning runes queued when the answer started left in one event: a dump (want at most %d)", most, queued, queued/3)
	}
}

// relayedLines are the log lines of requests to alias, decoded, in order.
func relayedLines(t *testing.T, logFile, alias string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(readLog(t, logFile), "\n") {
		if !strings.Contains(line, `"msg":"relayed"`) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, line)
		}
		if m["alias"] == alias {
			out = append(out, m)
		}
	}
	return out
}

// waitRelayed waits for n log lines of alias and returns them.
func waitRelayed(t *testing.T, logFile, alias string, n int) []map[string]any {
	t.Helper()
	waitFor(t, 5*time.Second, fmt.Sprintf("%d log lines of %s", n, alias), func() bool {
		return len(relayedLines(t, logFile, alias)) >= n
	})
	return relayedLines(t, logFile, alias)
}

// logInt is a numeric field of a log line (-1: absent).
func logInt(m map[string]any, key string) int {
	if v, ok := m[key].(float64); ok {
		return int(v)
	}
	return -1
}

// streamStatus is the part of a recent stream of the status JSON read here.
type streamStatus struct {
	Alias      string       `json:"alias"`
	Mode       string       `json:"mode"`
	ClusterIn  *float64     `json:"reasoning_cluster_in"`
	ClusterOut *float64     `json:"reasoning_cluster_out"`
	Marks      [][3]float64 `json:"marks"`
}

// newestStream is the newest recent stream of alias in the status JSON.
func newestStream(t *testing.T, alias string) streamStatus {
	t.Helper()
	var st struct {
		Streams []streamStatus `json:"streams"`
	}
	if err := json.Unmarshal(getStatusRaw(t, adminStatusURL), &st); err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Streams {
		if s.Alias == alias {
			return s
		}
	}
	t.Fatalf("no recent stream of %s in the status", alias)
	return streamStatus{}
}

// laneMarks counts a stream's timeline marks per side (0 in, 1 out) and
// lane (1 reasoning, 2 answer).
func laneMarks(s streamStatus) (n [2][4]int) {
	for _, m := range s.Marks {
		n[int(m[1])][int(m[2])]++
	}
	return n
}

// TestTaggedSplitReasoning: a tagged stream in split-reasoning reaches the
// client with its reasoning on the reasoning lane (reasoning_content
// deltas, re-chunked, no tag anywhere) and its answer exact; the
// reasoning still queued when the answer starts is not dumped; the status
// page's timeline shows reasoning-lane events in and out; the cluster
// rate is in the log line, the metric and the status JSON.
func TestTaggedSplitReasoning(t *testing.T) {
	logFile := startRelay(t, taggedPacedRelay, taggedSims)
	if t.Failed() {
		t.FailNow()
	}
	wantR, pieces, wantC := taggedPaced()
	clusterCount := `llm_relay_reasoning_cluster_rate_count{mode="split-reasoning",side="in"}`
	clusterSum := `llm_relay_reasoning_cluster_rate_sum{mode="split-reasoning",side="in"}`
	before := scrapeMetrics(t)

	s := streamTagged(t, "tagged-reasoner", "Authorization", "Bearer sk-tagged")
	if !s.done || s.finish != "stop" {
		t.Fatalf("done %v, finish %q:\n%s", s.done, s.finish, s.raw)
	}
	if got := s.reasoning(); got != wantR {
		t.Errorf("reasoning differs:\n got %q\nwant %q", got, wantR)
	}
	if got := s.content(); got != wantC {
		t.Errorf("content differs:\n got %q\nwant %q", got, wantC)
	}
	noTags(t, "the stream", s.raw)
	var deltas []string
	for _, e := range s.events {
		if e.reasoning != "" {
			deltas = append(deltas, e.reasoning)
			if e.content != "" {
				t.Errorf("one event carries reasoning %q and answer %q", e.reasoning, e.content)
			}
		}
	}
	checkClusters(t, "reasoning", deltas)
	if len(deltas) == len(pieces) {
		t.Errorf("%d reasoning deltas, as many as the upstream's pieces: not re-paced?", len(deltas))
	}
	checkNoReasoningDump(t, s)

	// The timeline: reasoning-lane events from the upstream and to the
	// client, answer-lane events too, and the cluster rate both ways.
	st := newestStream(t, "tagged-reasoner")
	n := laneMarks(st)
	t.Logf("timeline marks in %v, out %v", n[0], n[1])
	if st.Mode != "split-reasoning" || n[0][1] == 0 || n[1][1] == 0 || n[0][2] == 0 || n[1][2] == 0 {
		t.Errorf("mode %s, reasoning marks %d in and %d out, answer marks %d in and %d out: want all four lanes",
			st.Mode, n[0][1], n[1][1], n[0][2], n[1][2])
	}
	if st.ClusterIn == nil || st.ClusterOut == nil || *st.ClusterIn <= 0 || *st.ClusterIn >= 1 || *st.ClusterOut <= 0 {
		t.Errorf("status: reasoning cluster rate %v in, %v out; want both, in (0, 1)", st.ClusterIn, st.ClusterOut)
	}

	// The status page draws the reasoning rows of the newest stream.
	req, _ := http.NewRequest(http.MethodGet, relayBase+"/status", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page := readAll(t, resp)
	i := strings.Index(page, `<div class="stream"`)
	if i < 0 {
		t.Fatalf("no stream on the status page:\n%s", page)
	}
	stream := page[i:]
	if j := strings.Index(stream[1:], `<div class="stream"`); j >= 0 {
		stream = stream[:j+1]
	}
	for row, what := range map[string]string{"0": "upstream reasoning", "3": "client reasoning"} {
		m := regexp.MustCompile(`data-row="` + row + `" data-marks="(\d+)"`).FindStringSubmatch(stream)
		if m == nil {
			t.Errorf("no %s row on the status page's newest stream", what)
		} else if k, _ := strconv.Atoi(m[1]); k == 0 {
			t.Errorf("the status page's newest stream draws no %s events", what)
		}
	}

	// The log line and the metric carry the cluster rate.
	line := waitRelayed(t, logFile, "tagged-reasoner", 1)[0]
	sm, _ := line["smoothness"].(map[string]any)
	in, ok := sm["reasoning_cluster_in"].(float64)
	if !ok || in <= 0 || in >= 1 {
		t.Errorf("log line: reasoning_cluster_in %v in %v", sm["reasoning_cluster_in"], sm)
	}
	if _, ok := sm["reasoning_cluster_out"].(float64); !ok {
		t.Errorf("log line: no reasoning_cluster_out in %v", sm)
	}
	after := scrapeMetrics(t)
	if d := metricValue(t, after, clusterCount) - metricValue(t, before, clusterCount); d != 1 {
		t.Errorf("%s went up by %v, want 1", clusterCount, d)
	}
	if d := metricValue(t, after, clusterSum) - metricValue(t, before, clusterSum); d <= 0 || d >= 1 {
		t.Errorf("%s went up by %v, want the stream's rate, in (0, 1)", clusterSum, d)
	}
}

// TestTaggedReasoningHidden: `reasoning hide` on a tagged stream: no
// reasoning reaches the client, in a field or in tags, and the answer is
// exact.
func TestTaggedReasoningHidden(t *testing.T) {
	startRelay(t, taggedPacedRelay, taggedSims)
	if t.Failed() {
		t.FailNow()
	}
	_, _, wantC := taggedPaced()
	s := streamTagged(t, "tagged-hidden", "Authorization", "Bearer sk-tagged")
	if !s.done || s.finish != "stop" {
		t.Fatalf("done %v, finish %q:\n%s", s.done, s.finish, s.raw)
	}
	if r := s.reasoning(); r != "" {
		t.Errorf("reasoning hide: %d bytes of reasoning reached the client: %q", len(r), r)
	}
	if c := s.content(); c != wantC {
		t.Errorf("content differs:\n got %q\nwant %q", c, wantC)
	}
	noTags(t, "the stream", s.raw)
	if strings.Contains(s.raw, "reasoning_content") {
		t.Errorf("a reasoning field reached the client:\n%s", s.raw)
	}
}

// taggedBudgetRelay routes m to the tagged /big/ simulator (60 reasoning
// tokens inline), then the tags_unopened /small/ one (3), with a budget
// of 10 and the given action.
func taggedBudgetRelay(chain, action string) string {
	return `llm_relay {
		key sk-test-client
		upstream big http://127.0.0.1:9086/big/v1 {
			api chat
			reasoning_format tags
		}
		upstream small http://127.0.0.1:9086/small/v1 {
			api chat
			starts_in_reasoning
		}
		model m {
			` + chain + `
			reasoning_budget 10 ` + action + `
		}
	}`
}

// TestTaggedReasoningBudgetStream is TestReasoningBudgetActions on
// tagged reasoning: truncate cuts the reasoning and keeps the answer;
// failover gives the big model's reasoning up to the budget, then the
// small one's whole answer; error ends the stream with
// reasoning_budget_exceeded before any answer.
func TestTaggedReasoningBudgetStream(t *testing.T) {
	bigR, bigC := simTexts(3, 60, 10)
	smallR, smallC := simTexts(4, 3, 10)
	bigR, smallR = bigR+"\n", smallR+"\n"
	for _, action := range []string{"truncate", "failover", "error"} {
		t.Run(action, func(t *testing.T) {
			logFile := startRelay(t, taggedBudgetRelay("to big\n\t\t\tto small", action), taggedSims)
			if t.Failed() {
				t.FailNow()
			}
			s := streamTagged(t, "m", "Authorization", "Bearer sk-test-client")
			r, c := s.reasoning(), s.content()
			noTags(t, "the stream", s.raw)
			switch action {
			case "truncate":
				if !s.done || c != bigC || r == "" || !strings.HasPrefix(bigR, r) || len(r) >= len(bigR) {
					t.Fatalf("truncate: done %v, reasoning %d of %d bytes (prefix %v), content %q (want %q)",
						s.done, len(r), len(bigR), strings.HasPrefix(bigR, r), c, bigC)
				}
			case "failover":
				if !s.done || c != smallC || !strings.HasSuffix(r, smallR) || !strings.HasPrefix(bigR, strings.TrimSuffix(r, smallR)) {
					t.Fatalf("failover: done %v, content %q (want %q), reasoning %q", s.done, c, smallC, r)
				}
				line := waitRelayed(t, logFile, "m", 1)[0]
				if logInt(line, "reasoning_budget_failovers") != 1 || line["upstream"] != "small" {
					t.Errorf("log line %v", line)
				}
			case "error":
				if s.done || s.errCode != "reasoning_budget_exceeded" || c != "" || r == "" || !strings.HasPrefix(bigR, r) {
					t.Fatalf("error: done %v, code %q, content %q, reasoning %q", s.done, s.errCode, c, r)
				}
			}
		})
	}
}

// TestTaggedReasoningBudgetNonStream is TestReasoningBudgetNonStream on
// tagged reasoning: the non-stream answer is assembled from a stream and
// cut where a stream is.
func TestTaggedReasoningBudgetNonStream(t *testing.T) {
	bigR, bigC := simTexts(3, 60, 10)
	smallR, smallC := simTexts(4, 3, 10)
	bigR, smallR = bigR+"\n", smallR+"\n"
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for _, action := range []string{"truncate", "error", "failover", "failover alone"} {
		t.Run(action, func(t *testing.T) {
			chain := "to big\n\t\t\tto small"
			if action == "failover alone" {
				chain = "to big"
			}
			logFile := startRelay(t, taggedBudgetRelay(chain, strings.Fields(action)[0]), taggedSims)
			if t.Failed() {
				t.FailNow()
			}
			resp := post(t, body, "Authorization", "Bearer sk-test-client")
			c := decodeCompletion(t, resp)
			ch := c.Choices[0]
			content := ""
			if ch.Message.Content != nil {
				content = *ch.Message.Content
			}
			noTags(t, "the answer", content+ch.Message.ReasoningContent)
			r := ch.Message.ReasoningContent
			cutR := r != "" && strings.HasPrefix(bigR, r) && len(r) < len(bigR)
			switch action {
			case "truncate":
				if content != bigC || !cutR || ch.FinishReason != "stop" || !ch.ReasoningTruncated {
					t.Fatalf("truncate: content %q (want %q), reasoning %d of %d bytes (cut %v), finish %q, marked %v",
						content, bigC, len(r), len(bigR), cutR, ch.FinishReason, ch.ReasoningTruncated)
				}
			case "error", "failover alone":
				if content != "" || !cutR || ch.FinishReason != "length" || !ch.ReasoningTruncated {
					t.Fatalf("%s: content %q, reasoning %d of %d bytes (cut %v), finish %q, marked %v",
						action, content, len(r), len(bigR), cutR, ch.FinishReason, ch.ReasoningTruncated)
				}
			case "failover":
				if content != smallC || r != smallR || ch.FinishReason != "stop" || ch.ReasoningTruncated {
					t.Fatalf("failover: content %q (want %q), reasoning %q (want %q), finish %q, marked %v",
						content, smallC, r, smallR, ch.FinishReason, ch.ReasoningTruncated)
				}
				line := waitRelayed(t, logFile, "m", 1)[0]
				if logInt(line, "reasoning_budget_failovers") != 1 {
					t.Errorf("log line %v", line)
				}
			}
		})
	}
}

// TestTaggedReasoningTrace: return_reasoning_trace on a non-stream Chat
// request to a tagged upstream: the message has the reasoning apart from
// the answer, and the trace holds it, delta by delta, in the upstream's
// bursts.
func TestTaggedReasoningTrace(t *testing.T) {
	startRelay(t, `llm_relay {
		upstream tags http://127.0.0.1:9086/paced/v1 {
			api chat
			reasoning_format tags
		}
		model m {
			to tags
		}
	}`, taggedSims)
	if t.Failed() {
		t.FailNow()
	}
	wantR, pieces, wantC := taggedPaced()
	c := decodeCompletion(t, post(t, `{"model":"m","return_reasoning_trace":true,"messages":[{"role":"user","content":"hi"}]}`))
	m := c.Choices[0].Message
	if m.Content == nil || *m.Content != wantC || c.Choices[0].FinishReason != "stop" {
		t.Fatalf("answer %+v", c)
	}
	if m.ReasoningContent != wantR {
		t.Fatalf("reasoning_content %q, want %q", m.ReasoningContent, wantR)
	}
	tr := m.ReasoningTrace
	if tr == nil {
		t.Fatal("no reasoning_trace")
	}
	var joined strings.Builder
	bursts, last := 1, 0.0
	for i, e := range *tr {
		joined.WriteString(e.Text)
		if e.Position < last || e.Position > 1 {
			t.Errorf("entry %d at %v, after %v", i, e.Position, last)
		}
		if i > 0 && e.Position-last > 0.05 {
			bursts++
		}
		last = e.Position
	}
	if joined.String() != wantR {
		t.Errorf("trace texts %q, want the reasoning %q", joined.String(), wantR)
	}
	// One entry per reasoning delta: the simulator's pieces, give or take
	// the pieces a tag was glued to or cut from.
	if n := len(*tr); n < len(pieces) || n > len(pieces)+3 {
		t.Errorf("%d trace entries for %d reasoning pieces", n, len(pieces))
	}
	// 60 deltas in bursts of 15, 200ms apart, in a ~1.4s answer.
	if bursts < 3 || bursts > 6 {
		t.Errorf("the trace shows %d bursts, the simulator sent 4", bursts)
	}
	noTags(t, "the trace", joined.String())
}

// TestTaggedUsageEstimated: a tagged upstream counts its reasoning in
// completion_tokens and reports no reasoning_tokens. The relay's log line
// and ledger then carry reasoning_tokens estimated from the reasoning it
// read, with usage_estimated true, for a stream, a non-stream answer
// assembled from one, a stream whose reasoning is hidden and a plain
// non-stream answer; the client's usage is the upstream's, unchanged. A
// reasoning field without reasoning_tokens is estimated the same way; an
// upstream that counts its reasoning is taken at its word.
func TestTaggedUsageEstimated(t *testing.T) {
	// A field-based upstream that does not count its reasoning (vLLM with
	// a reasoning parser reports no completion_tokens_details).
	var self atomic.Pointer[fakeUpstream]
	fields := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if self.Load().requests()[n-1].body["stream"] != true {
			answerJSON(w, 200, `{"id":"f2","object":"chat.completion","created":5,"model":"f","choices":[{"index":0,"message":{"role":"assistant","content":"The answer.","reasoning_content":"`+strings.Repeat("Let me think. ", 20)+`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":90,"total_tokens":97}}`)
			return
		}
		datas := []string{`{"id":"f1","object":"chat.completion.chunk","created":5,"model":"f","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`}
		for range 20 {
			datas = append(datas, `{"id":"f1","object":"chat.completion.chunk","created":5,"model":"f","choices":[{"index":0,"delta":{"reasoning_content":"Let me think. "},"finish_reason":null}]}`)
		}
		datas = append(datas, chunk("The answer."),
			`{"id":"f1","object":"chat.completion.chunk","created":5,"model":"f","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"f1","object":"chat.completion.chunk","created":5,"model":"f","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":90,"total_tokens":97}}`,
			"[DONE]")
		streamEvents(w, 0, datas...)
	})
	self.Store(fields)
	logFile := startRelay(t, `llm_relay {
		key sk-tagged tagged-usage
		upstream big http://127.0.0.1:9086/big/v1 {
			api chat
			reasoning_format tags
		}
		upstream counted http://127.0.0.1:9086/bigfields/v1 {
			api chat
		}
		upstream fields `+fields.v1()+` {
			api chat
		}
		model tagged {
			to big
		}
		model tagged-trace {
			to big
		}
		model tagged-hidden {
			to big
			smoothing split-reasoning {
				reasoning hide
			}
		}
		model counted {
			to counted
		}
		model fields {
			to fields
		}
	}`, taggedSims)
	if t.Failed() {
		t.FailNow()
	}
	auth := []string{"Authorization", "Bearer sk-tagged"}
	keyReasoning := func() int64 {
		var st struct {
			Keys []struct {
				Key    string `json:"key"`
				Tokens struct {
					Reasoning int64 `json:"reasoning"`
				} `json:"tokens"`
			} `json:"keys"`
		}
		if err := json.Unmarshal(getStatusRaw(t, adminStatusURL), &st); err != nil {
			t.Fatal(err)
		}
		for _, k := range st.Keys {
			if k.Key == "tagged-usage" {
				return k.Tokens.Reasoning
			}
		}
		return 0
	}
	// The simulator counts 60 reasoning and 10 answer tokens, tags aside;
	// the relay's estimate of 60 one-token pieces is about 60.
	checkEstimated := func(alias string) int {
		t.Helper()
		line := waitRelayed(t, logFile, alias, 1)[0]
		r, comp := logInt(line, "reasoning_tokens"), logInt(line, "completion_tokens")
		if r < 30 || r > comp || line["usage_estimated"] != true {
			t.Errorf("%s: log line reasoning_tokens %d of completion_tokens %d, usage_estimated %v; want an estimate of about 60, marked",
				alias, r, comp, line["usage_estimated"])
		}
		return r
	}
	clientUsage := func(what string, raw []byte) {
		t.Helper()
		var u struct {
			CompletionTokens int             `json:"completion_tokens"`
			Details          json.RawMessage `json:"completion_tokens_details"`
		}
		if err := json.Unmarshal(raw, &u); err != nil || u.CompletionTokens == 0 || u.Details != nil {
			t.Errorf("%s: the client's usage %s is not the upstream's (no details)", what, raw)
		}
	}

	before := keyReasoning()
	s := streamTagged(t, "tagged", auth...)
	if !s.done || s.reasoning() == "" {
		t.Fatalf("stream: %s", s.raw)
	}
	clientUsage("stream", s.usage)
	sum := checkEstimated("tagged")

	var whole struct {
		Usage json.RawMessage `json:"usage"`
	}
	resp := post(t, `{"model":"tagged-trace","return_reasoning_trace":true,"messages":[{"role":"user","content":"hi"}]}`, auth...)
	if err := json.Unmarshal([]byte(readAll(t, resp)), &whole); err != nil {
		t.Fatal(err)
	}
	clientUsage("assembled", whole.Usage)
	sum += checkEstimated("tagged-trace")

	s = streamTagged(t, "tagged-hidden", auth...)
	if s.reasoning() != "" || !s.done {
		t.Fatalf("hidden stream: %s", s.raw)
	}
	sum += checkEstimated("tagged-hidden")

	if got := keyReasoning() - before; got != int64(sum) {
		t.Errorf("the ledger counted %d reasoning tokens for key tagged-usage, the log lines %d", got, sum)
	}

	// A plain non-stream answer, read whole and given apart.
	resp = post(t, `{"model":"tagged","messages":[{"role":"user","content":"hi"}]}`, auth...)
	if err := json.Unmarshal([]byte(readAll(t, resp)), &whole); err != nil {
		t.Fatal(err)
	}
	clientUsage("whole", whole.Usage)
	waitFor(t, 5*time.Second, "the second log line of tagged", func() bool { return len(relayedLines(t, logFile, "tagged")) >= 2 })
	if line := relayedLines(t, logFile, "tagged")[1]; logInt(line, "reasoning_tokens") < 30 || line["usage_estimated"] != true {
		t.Errorf("whole answer: log line reasoning_tokens %v, usage_estimated %v", line["reasoning_tokens"], line["usage_estimated"])
	}

	// A reasoning field the upstream does not count: estimated too.
	s = streamTagged(t, "fields", auth...)
	if !s.done || s.reasoning() == "" {
		t.Fatalf("fields stream: %s", s.raw)
	}
	resp = post(t, `{"model":"fields","messages":[{"role":"user","content":"hi"}]}`, auth...)
	if got := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(got, `"usage":{"prompt_tokens":7,"completion_tokens":90,"total_tokens":97}`) {
		t.Fatalf("fields, whole: status %d: %s", resp.StatusCode, got)
	}
	for i, line := range waitRelayed(t, logFile, "fields", 2) {
		// 280 runes of reasoning: 70 tokens by the estimate.
		if logInt(line, "reasoning_tokens") != 70 || line["usage_estimated"] != true || logInt(line, "completion_tokens") != 90 {
			t.Errorf("fields %d: log line %v", i, line)
		}
	}

	// An upstream that counts its reasoning: its figures, not estimated.
	s = streamTagged(t, "counted", auth...)
	if !s.done {
		t.Fatalf("counted stream: %s", s.raw)
	}
	line := waitRelayed(t, logFile, "counted", 1)[0]
	if logInt(line, "reasoning_tokens") != 60 || line["usage_estimated"] != false {
		t.Errorf("counted: log line %v", line)
	}

	// A Messages client: Anthropic's usage has no place for reasoning
	// tokens. The upstream's count is kept, streamed or whole, and a tagged
	// upstream's reasoning is estimated as for a Chat client.
	for i, body := range []string{
		`{"model":"counted","max_tokens":500,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"counted","max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"tagged","max_tokens":500,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"tagged","max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		resp := postPath(t, "/v1/messages", body, "x-api-key", "sk-tagged", "anthropic-version", "2023-06-01")
		got := readAll(t, resp)
		if resp.StatusCode != 200 || strings.Contains(got, "<think>") || !strings.Contains(got, "thinking") {
			t.Fatalf("Messages %d: status %d: %s", i, resp.StatusCode, got)
		}
		alias := "counted"
		if i >= 2 {
			alias = "tagged"
		}
		n := map[string]int{"counted": 2, "tagged": 3}[alias] + i%2
		waitFor(t, 5*time.Second, "the Messages request's log line", func() bool { return len(relayedLines(t, logFile, alias)) >= n })
		line := relayedLines(t, logFile, alias)[n-1]
		r := logInt(line, "reasoning_tokens")
		switch {
		case alias == "counted" && (r != 60 || line["usage_estimated"] != false):
			t.Errorf("Messages %d: the upstream's 60 reasoning tokens lost: %v", i, line)
		case alias == "tagged" && (r < 30 || r > logInt(line, "completion_tokens") || line["usage_estimated"] != true):
			t.Errorf("Messages %d: tagged reasoning not estimated: %v", i, line)
		}
	}
}

// TestTaggedShadowCompared: a shadow copy to a tagged upstream is compared
// on its answer without the tags (the upstream-level reasoning_format
// applies to the shadow's target): the same answer as the primary's
// (which sends its reasoning in a field) is similarity 1, streamed or not.
func TestTaggedShadowCompared(t *testing.T) {
	startRelay(t, `llm_relay {
		upstream primary http://127.0.0.1:9086/bigfields/v1 {
			api chat
		}
		upstream tags http://127.0.0.1:9086/big/v1 {
			api chat
			reasoning_format tags
		}
		model shadowed {
			to primary
			shadow tags 100
		}
	}`, taggedSims)
	if t.Failed() {
		t.FailNow()
	}
	_, bigC := simTexts(3, 60, 10)
	for i, body := range []string{
		`{"model":"shadowed","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"shadowed","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		resp := post(t, body)
		got := readAll(t, resp)
		if resp.StatusCode != 200 || !strings.Contains(got, "reasoning_content") {
			t.Fatalf("request %d: status %d: %s", i, resp.StatusCode, got)
		}
		waitFor(t, 5*time.Second, "the shadow's comparison", func() bool {
			doc := getRelayStatus(t)
			return len(doc.Shadows) == 1 && doc.Shadows[0].Stats.Compared == int64(i+1)
		})
	}
	sh := getRelayStatus(t).Shadows[0]
	if sh.Upstream != "tags" || sh.Stats.OK != 2 || sh.Stats.Failed != 0 {
		t.Fatalf("shadow %+v", sh)
	}
	if sh.Stats.MeanSimilarity != 1 || sh.Stats.MeanLengthRat != 1 {
		t.Errorf("shadow comparison: similarity %v, length ratio %v; want 1 and 1 (the answers are both %q)",
			sh.Stats.MeanSimilarity, sh.Stats.MeanLengthRat, bigC)
	}
	var st struct {
		Shadows []struct {
			Stats struct {
				CompletionTokens int64 `json:"completion_tokens"`
				ReasoningTokens  int64 `json:"reasoning_tokens"`
			} `json:"stats"`
		} `json:"shadows"`
	}
	if err := json.Unmarshal(getStatusRaw(t, adminStatusURL), &st); err != nil {
		t.Fatal(err)
	}
	// The shadow's reasoning, which its upstream does not count, is
	// estimated as the relay's own usage is: about 60 tokens a copy.
	if r := st.Shadows[0].Stats.ReasoningTokens; r < 60 || r > st.Shadows[0].Stats.CompletionTokens {
		t.Errorf("shadow reasoning_tokens %d of completion_tokens %d; want an estimate of about 120", r, st.Shadows[0].Stats.CompletionTokens)
	}
}
