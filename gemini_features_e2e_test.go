package llmrelay_test

// The relay's features for a Gemini client (issue 32, "Everything else,
// in the fourth dialect too"): a Gemini client is served through the
// relay's Chat path (gemini.go), so each feature the relay has for Chat
// clients is shown here to reach a Gemini client in Gemini's words, by
// plain HTTP on the Gemini API's paths (and the official @google/genai
// SDK where what it assembles matters), through a real Caddy in front of
// simulators and scripted upstreams on 127.0.0.1. This file's ports are
// 9170-9189; it also runs other files' simulator sites.

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/canary"
	"github.com/llmrelay/caddy-llm-relay/internal/sim"
	"github.com/llmrelay/caddy-llm-relay/internal/splice"
)

// gfeatSims runs the one simulator no other file has, on :9170: /drop/
// and /drop-late/ break after 8 events (in the reasoning) and after 30
// (in the answer), /good/ answers whole; the same seed, so the same
// answer (contSite's, with reasoning). The other tests here use the
// sites of the features they show: pacingSimSite (clustered reasoning),
// taggedSimSite (<think> tags), handoffSimSite (the hand-off's two legs),
// usageSims (long and brief reasoning).
const gfeatSims = `http://127.0.0.1:9170 {
	handle /drop/* {
		llm_simulator {
			seed 11
			reasoning_tokens 12
			content_tokens 40
			pattern steady 0
			drop_after 8
		}
	}
	handle /drop-late/* {
		llm_simulator {
			seed 11
			reasoning_tokens 12
			content_tokens 40
			pattern steady 0
			drop_after 30
		}
	}
	handle /good/* {
		llm_simulator {
			seed 11
			reasoning_tokens 12
			content_tokens 40
			pattern steady 0
		}
	}
}`

// gfeatStream is a Gemini stream as a client reads it: the thought and
// the answer text of each chunk (pieces, in order; empty ones left out),
// each chunk's finishReason, the last usageMetadata, any error object.
type gfeatStream struct {
	status      int
	thoughts    []string
	text        []string
	finishes    []string // one per chunk, "" where none
	chunks      int
	usage       map[string]any
	errors      []string // the raw error objects
	header      http.Header
	raw         string
	blankEvents int // bare line breaks between events (heartbeats)
}

func (s gfeatStream) thought() string { return strings.Join(s.thoughts, "") }
func (s gfeatStream) answer() string  { return strings.Join(s.text, "") }

// finish is the finishReason of the last chunk, and whether it is the
// only chunk that has one.
func (s gfeatStream) finish() (string, bool) {
	if len(s.finishes) == 0 {
		return "", false
	}
	n := 0
	for _, f := range s.finishes {
		if f != "" {
			n++
		}
	}
	last := s.finishes[len(s.finishes)-1]
	return last, n == 1 && last != ""
}

// gfeatChunk is the part of a GenerateContentResponse (or a Google error
// object) these tests read.
type gfeatChunk struct {
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text    string `json:"text"`
				Thought bool   `json:"thought"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata map[string]any  `json:"usageMetadata"`
	Error         json.RawMessage `json:"error"`
}

func (s *gfeatStream) add(t *testing.T, data []byte) {
	t.Helper()
	var c gfeatChunk
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("a Gemini event that is not JSON (%v): %q", err, data)
	}
	if c.Error != nil {
		s.errors = append(s.errors, string(c.Error))
		return
	}
	s.chunks++
	finish := ""
	for _, cand := range c.Candidates {
		for _, p := range cand.Content.Parts {
			switch {
			case p.Text == "":
			case p.Thought:
				s.thoughts = append(s.thoughts, p.Text)
			default:
				s.text = append(s.text, p.Text)
			}
		}
		finish += cand.FinishReason
	}
	s.finishes = append(s.finishes, finish)
	if c.UsageMetadata != nil {
		s.usage = c.UsageMetadata
	}
}

// geminiStreamOf posts a Gemini body to model's :streamGenerateContent
// (alt=sse when sse) with the relay's Gemini key and any more headers,
// and reads the stream. An SSE stream must be data events only (and the
// bare error object after an in-band error's data event, gemini.go's
// sseAndBareError), blank lines between; without alt, one JSON array.
func geminiStreamOf(t *testing.T, model string, sse bool, body string, hdr ...string) gfeatStream {
	t.Helper()
	path := "/v1beta/models/" + model + ":streamGenerateContent"
	if sse {
		path += "?alt=sse"
	}
	resp := geminiPost(t, path, body, append([]string{"x-goog-api-key", geminiRelayKey}, hdr...)...)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s: reading the stream: %v", model, err)
	}
	s := gfeatStream{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if resp.StatusCode != 200 {
		return s
	}
	if !sse {
		var arr []json.RawMessage
		if err := json.Unmarshal(raw, &arr); err != nil {
			t.Fatalf("%s: the stream is not one JSON array (%v):\n%s", model, err, raw)
		}
		for _, el := range arr {
			s.add(t, el)
		}
		return s
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("%s: Content-Type %q", model, ct)
	}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(nil, 1<<20)
	prevBlank := false
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" {
			if prevBlank {
				s.blankEvents++
			}
			prevBlank = true
			continue
		}
		prevBlank = false
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			s.add(t, []byte(data))
			continue
		}
		if strings.HasPrefix(line, `{"error"`) && len(s.errors) > 0 {
			continue // the bare copy of the in-band error just read
		}
		t.Fatalf("%s: a line that is neither data nor the bare error: %q", model, line)
	}
	return s
}

// geminiWhole posts a Gemini body to model's :generateContent and reads
// the answer (status, thoughts, text, finishReason, usage).
func geminiWhole(t *testing.T, model, body string, hdr ...string) (gfeatStream, *http.Response) {
	t.Helper()
	resp := geminiPost(t, "/v1beta/models/"+model+":generateContent", body, append([]string{"x-goog-api-key", geminiRelayKey}, hdr...)...)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := gfeatStream{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if resp.StatusCode == 200 {
		s.add(t, raw)
	}
	return s, resp
}

// geminiAsk is a Gemini body that asks a question and, with a budget,
// for thoughts.
func geminiAsk(question, thinking string) string {
	b := `{"contents":[{"role":"user","parts":[{"text":` + strconvQuote(question) + `}]}]`
	if thinking != "" {
		b += `,"generationConfig":{"thinkingConfig":` + thinking + `}`
	}
	return b + `}`
}

// TestGeminiFeatureSplitReasoning: `smoothing split-reasoning` re-paces a
// Gemini client's stream with the reasoning on its own lane: the thought
// parts joined are the upstream's reasoning and the text parts its
// answer, byte for byte, in other pieces than the upstream sent (a Gemini
// stream passed through has one chunk per Chat delta: the model with
// smoothing off shows it, so the check can tell), in SSE and in the JSON
// array, and on the model with smoothing off when X-Relay-Mode asks; the
// status view's streams say split-reasoning; the official SDK assembles
// the same answer.
func TestGeminiFeatureSplitReasoning(t *testing.T) {
	logFile := startRelay(t, `llm_relay {
		key `+geminiRelayKey+`
		upstream paced http://127.0.0.1:9097/v1 {
			api chat
		}
		smoothing split-reasoning
		model gemini-paced {
			to paced sim-reasoner
		}
		model gemini-unpaced {
			to paced sim-reasoner
			smoothing off
		}
	}`, pacingSimSite)
	r, c := 60, 40
	upR, upC := sim.Texts(sim.Config{Seed: 5, ReasoningTokens: &r, ContentTokens: &c})
	upReasoning, upContent := strings.Join(upR, ""), strings.Join(upC, "")
	body := geminiAsk("hi", `{"includeThoughts":true,"thinkingBudget":4096}`)

	// The control: passed through, a chunk per upstream delta.
	off := geminiStreamOf(t, "gemini-unpaced", true, body)
	if off.status != 200 || !slices.Equal(off.thoughts, upR) || !slices.Equal(off.text, upC) {
		t.Fatalf("smoothing off: %d, %d thought and %d text pieces; want the upstream's %d and %d piece for piece:\n%s",
			off.status, len(off.thoughts), len(off.text), len(upR), len(upC), off.raw)
	}

	for _, sse := range []bool{true, false} {
		s := geminiStreamOf(t, "gemini-paced", sse, body)
		what := fmt.Sprintf("gemini-paced (sse %v)", sse)
		if s.status != 200 {
			t.Fatalf("%s: %d %s", what, s.status, s.raw)
		}
		if s.thought() != upReasoning || s.answer() != upContent {
			t.Errorf("%s: the text changed on its way:\nthoughts %q\nwant     %q\ntext %q\nwant %q", what, s.thought(), upReasoning, s.answer(), upContent)
		}
		if slices.Equal(s.thoughts, upR) && slices.Equal(s.text, upC) {
			t.Errorf("%s: the thought and text parts are the upstream's deltas, piece for piece: not re-paced", what)
		}
		if f, only := s.finish(); f != "STOP" || !only || len(s.errors) > 0 {
			t.Errorf("%s: finishReason %q (only on the last chunk: %v), errors %v", what, f, only, s.errors)
		}
		checkClusters(t, "thought", s.thoughts)
		checkClusters(t, "text", s.text)
	}

	// The relay's per-request knob, a header (a Gemini body has no place
	// for the relay's own options): X-Relay-Mode asks for it on the model
	// whose config has smoothing off.
	s := geminiStreamOf(t, "gemini-unpaced", true, body, "X-Relay-Mode", "split-reasoning")
	if s.thought() != upReasoning || s.answer() != upContent || slices.Equal(s.thoughts, upR) && slices.Equal(s.text, upC) {
		t.Errorf("X-Relay-Mode split-reasoning on smoothing off: %d thought and %d text pieces (the upstream's: %d, %d), text exact %v",
			len(s.thoughts), len(s.text), len(upR), len(upC), s.thought() == upReasoning && s.answer() == upContent)
	}

	// The status view's recent streams: the Gemini streams, re-paced.
	var st struct {
		Streams []struct {
			Alias     string `json:"alias"`
			Mode      string `json:"mode"`
			EventsIn  int    `json:"events_in"`
			EventsOut int    `json:"events_out"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(getStatusRaw(t, adminStatusURL), &st); err != nil {
		t.Fatal(err)
	}
	paced := 0
	for _, v := range st.Streams {
		if v.Alias == "gemini-paced" && v.Mode == "split-reasoning" && v.EventsIn > 0 && v.EventsOut > 0 && v.EventsIn != v.EventsOut {
			paced++
		}
	}
	if paced != 2 {
		t.Errorf("the status view shows %d re-paced gemini-paced streams, want 2: %+v", paced, st.Streams)
	}
	waitFor(t, 5*time.Second, "the log lines", func() bool {
		return strings.Count(readLog(t, logFile), `"api":"gemini","upstream":"paced"`) >= 3 &&
			strings.Contains(readLog(t, logFile), `"smoothing":"split-reasoning"`)
	})

	node := requireNode(t, filepath.Join("@google", "genai"), "the @google/genai SDK")
	var got struct {
		Text, Thoughts, Finish string
		Chunks                 int
	}
	runGeminiSDKRelay(t, node, "gemini-paced", "stream", &got)
	if got.Text != upContent || got.Thoughts != upReasoning || got.Finish != "STOP" {
		t.Errorf("@google/genai: text %q thoughts %q finish %q;\nwant %q / %q / STOP", got.Text, got.Thoughts, got.Finish, upContent, upReasoning)
	}
}

// TestGeminiFeatureInlineReasoning: a chat model that writes its
// reasoning inline between <think> tags (reasoning_format tags, on the
// upstream or on the target; starts_in_reasoning for DeepSeek-R1's form
// is the same reader) reaches a Gemini client as thought parts, and the
// answer alone as text, streamed (SSE and the array) and whole. The Chat
// clients' reasoning_field (what name a Chat client reads the reasoning
// under, or inline back in the content) is a Chat client's wire choice:
// a Gemini client gets thought parts whatever it says.
func TestGeminiFeatureInlineReasoning(t *testing.T) {
	startRelay(t, `llm_relay {
		key `+geminiRelayKey+`
		upstream tags http://127.0.0.1:9085/tags/v1 {
			api chat
			reasoning_format tags
		}
		upstream rawtags http://127.0.0.1:9085/tags/v1 {
			api chat
		}
		model gemini-tagged {
			to tags sim-reasoner
		}
		model gemini-per-target {
			to rawtags sim-reasoner {
				reasoning_format tags
			}
		}
		model gemini-untreated {
			to rawtags sim-reasoner
		}
		model gemini-tagged-reasoning {
			to tags sim-reasoner
			reasoning_field reasoning
		}
		model gemini-tagged-both {
			to tags sim-reasoner
			reasoning_field both
		}
		model gemini-tagged-inline {
			to tags sim-reasoner
			reasoning_field inline
		}
	}`, taggedSimSite)
	simReasoning, wantReasoning, answer := taggedTexts(t)
	body := geminiAsk("hi", `{"includeThoughts":true}`)

	// Without reasoning_format the tags are the answer's text: what the
	// simulator sends, so the treated cases below show the relay's work.
	raw, _ := geminiWhole(t, "gemini-untreated", body)
	if raw.status != 200 || raw.thought() != "" || !strings.Contains(raw.answer(), "<think>") || !strings.Contains(raw.answer(), simReasoning) {
		t.Fatalf("untreated: %d thoughts %q text %q; want the tags in the text", raw.status, raw.thought(), raw.answer())
	}

	for _, model := range []string{"gemini-tagged", "gemini-per-target", "gemini-tagged-reasoning", "gemini-tagged-both", "gemini-tagged-inline"} {
		whole, _ := geminiWhole(t, model, body)
		streams := map[string]gfeatStream{"whole": whole}
		// Each streamed answer cuts its tags at other places: a few
		// each way.
		for i := range 3 {
			streams[fmt.Sprintf("sse %d", i)] = geminiStreamOf(t, model, true, body)
			streams[fmt.Sprintf("array %d", i)] = geminiStreamOf(t, model, false, body)
		}
		for how, s := range streams {
			if s.status != 200 {
				t.Fatalf("%s %s: %d %s", model, how, s.status, s.raw)
			}
			if s.thought() != wantReasoning || s.answer() != answer || hasTag(s.answer()) || hasTag(s.thought()) {
				t.Errorf("%s %s: thoughts %q text %q;\nwant %q / %q", model, how, s.thought(), s.answer(), wantReasoning, answer)
			}
			if f, only := s.finish(); f != "STOP" || !only {
				t.Errorf("%s %s: finishReason %q (alone on the last chunk: %v)", model, how, f, only)
			}
		}
	}
}

// gfeatHandoff: hand-off aliases as handoff_e2e_test.go's, on its
// simulators (handoffSimSite) and the Gemini key: baton reasons on a chat target and answers on an
// anthropic one (the reasoning as a prefill), baton-user answers on a
// chat one (the reasoning in a user turn).
const gfeatHandoff = `llm_relay {
	key ` + geminiRelayKey + `
	upstream reasoner http://127.0.0.1:9087/reason/v1 {
		api chat
	}
	upstream echo-claude http://127.0.0.1:9087/echo/v1 {
		api anthropic
	}
	upstream echo-chat http://127.0.0.1:9087/echo/v1 {
		api chat
	}
	model baton {
		reason reasoner sim-r1
		to echo-claude sim-claude
	}
	model baton-user {
		reason reasoner sim-r1
		to echo-chat sim-chat
	}
}`

// TestGeminiFeatureHandoff: a hand-off alias asked by a Gemini client
// reasons on one target and answers on another: the thought parts are
// the reasoning leg's reasoning, the text the answer leg's answer (the
// echo simulator says what reasoning it found, and where, in its
// request), streamed and whole, and the @google/genai SDK reads the same.
func TestGeminiFeatureHandoff(t *testing.T) {
	logFile := startRelay(t, gfeatHandoff, handoffSimSite)
	reasoning := handoffReasoning(t)
	body := geminiAsk("hi", `{"includeThoughts":true}`)
	for _, tc := range []struct{ model, where string }{{"baton", "prefill"}, {"baton-user", "user"}} {
		want := echoOf(tc.where, reasoning)
		whole, _ := geminiWhole(t, tc.model, body)
		sse := geminiStreamOf(t, tc.model, true, body)
		arr := geminiStreamOf(t, tc.model, false, body)
		for how, s := range map[string]gfeatStream{"whole": whole, "sse": sse, "array": arr} {
			if s.status != 200 {
				t.Fatalf("%s %s: %d %s", tc.model, how, s.status, s.raw)
			}
			if s.thought() != reasoning || s.answer() != want {
				t.Errorf("%s %s: thoughts %q text %q;\nwant the reasoning leg's %q and the answer leg's %q", tc.model, how, s.thought(), s.answer(), reasoning, want)
			}
			if f, only := s.finish(); f != "STOP" || !only || len(s.errors) > 0 {
				t.Errorf("%s %s: finishReason %q (alone: %v), errors %v", tc.model, how, f, only, s.errors)
			}
		}
	}
	waitFor(t, 5*time.Second, "the hand-off log lines", func() bool {
		return strings.Count(readLog(t, logFile), `"handoff":{`) >= 6
	})
	mustContain(t, readLog(t, logFile), `"alias":"baton","api":"gemini"`)

	node := requireNode(t, filepath.Join("@google", "genai"), "the @google/genai SDK")
	for _, mode := range []string{"create", "stream"} {
		var got struct{ Text, Thoughts, Finish string }
		runGeminiSDKRelay(t, node, "baton", mode, &got)
		if got.Thoughts != reasoning || got.Text != echoOf("prefill", reasoning) || got.Finish != "STOP" {
			t.Errorf("@google/genai %s: thoughts %q text %q finish %q", mode, got.Thoughts, got.Text, got.Finish)
		}
	}
}

// continuedThoughts reports whether thoughts is what a client reads of a
// continued stream's reasoning: the whole reasoning when the break fell
// in the answer; when it fell in the reasoning (the next target reasons
// again from the start, docs/continuation.md), what came before the
// break, the marker, and the whole reasoning.
func continuedThoughts(thoughts, reasoning, where string) bool {
	if where != "reasoning" {
		return thoughts == reasoning
	}
	before, again, ok := strings.Cut(thoughts, splice.Marker)
	return ok && again == reasoning && before != "" && strings.HasPrefix(reasoning, before) && before != reasoning
}

// TestGeminiFeatureContinuation: a stream that breaks after the commit
// point (the upstream's connection cut, in the reasoning or in the
// answer) is continued on the next target (of the same or another
// dialect), for a Gemini client too: one clean stream, the reasoning as
// thoughts (restarted after the marker when the break fell in it) and
// the whole answer as text, one finishReason on the last chunk, no error object; the seam
// comment a Chat client would see is a bare line break to a Gemini
// client (as heartbeats are). The log line and the continuations metric
// say so, and @google/genai reads one answer.
func TestGeminiFeatureContinuation(t *testing.T) {
	logFile := startRelay(t, `llm_relay {
		key `+geminiRelayKey+`
		upstream drop http://127.0.0.1:9170/drop/v1 {
			api chat
		}
		upstream droplate http://127.0.0.1:9170/drop-late/v1 {
			api chat
		}
		upstream good http://127.0.0.1:9170/good/v1 {
			api chat
		}
		upstream goodanth http://127.0.0.1:9170/good/v1 {
			api anthropic
		}
		model gemini-cont {
			to drop sim-reasoner
			to good sim-reasoner
		}
		model gemini-cont-late {
			to droplate sim-reasoner
			to good sim-reasoner
		}
		model gemini-cont-anth {
			to droplate sim-reasoner
			to goodanth sim-reasoner
		}
	}`, gfeatSims)
	reasoning, content := simTexts(11, 12, 40)
	body := geminiAsk("hi", `{"includeThoughts":true,"thinkingBudget":2048}`)
	before := scrapeMetrics(t)
	for _, tc := range []struct{ model, upstream, where string }{
		{"gemini-cont", "good", "reasoning"},
		{"gemini-cont-late", "good", "answer"},
		{"gemini-cont-anth", "goodanth", "answer"},
	} {
		for _, sse := range []bool{true, false} {
			s := geminiStreamOf(t, tc.model, sse, body)
			what := fmt.Sprintf("%s (sse %v)", tc.model, sse)
			if s.status != 200 {
				t.Fatalf("%s: %d %s", what, s.status, s.raw)
			}
			if len(s.errors) > 0 || !continuedThoughts(s.thought(), reasoning, tc.where) || s.answer() != content {
				t.Errorf("%s: errors %v, thoughts %q text %q;\nwant %q / %q", what, s.errors, s.thought(), s.answer(), reasoning, content)
			}
			if f, only := s.finish(); f != "STOP" || !only {
				t.Errorf("%s: finishReason %q (alone on the last chunk: %v)\n%s", what, f, only, s.raw)
			}
			if s.header.Get("X-Relay-Upstream") != "drop" && s.header.Get("X-Relay-Upstream") != "droplate" {
				t.Errorf("%s: X-Relay-Upstream %q: the stream committed on the first target", what, s.header.Get("X-Relay-Upstream"))
			}
			if strings.Contains(s.raw, "relay-continued") {
				t.Errorf("%s: the seam comment reached the Gemini client:\n%s", what, s.raw)
			}
		}
		series := `llm_relay_continuations_total{alias="` + tc.model + `",upstream="` + tc.upstream + `",where="` + tc.where + `"}`
		if got := metricValue(t, scrapeMetrics(t), series) - metricValue(t, before, series); got != 2 {
			t.Errorf("%s = +%v, want +2", series, got)
		}
	}
	waitFor(t, 5*time.Second, "the log lines", func() bool {
		return strings.Count(readLog(t, logFile), `"continued":[{"from":"drop`) == 6
	})
	mustContain(t, readLog(t, logFile), `"alias":"gemini-cont","api":"gemini"`)

	node := requireNode(t, filepath.Join("@google", "genai"), "the @google/genai SDK")
	for _, model := range []string{"gemini-cont", "gemini-cont-late"} {
		var got struct{ Text, Thoughts, Finish string }
		runGeminiSDKRelay(t, node, model, "stream", &got)
		if !continuedThoughts(got.Thoughts, reasoning, map[string]string{"gemini-cont": "reasoning"}[model]) || got.Text != content || got.Finish != "STOP" {
			t.Errorf("@google/genai %s: thoughts %q text %q finish %q", model, got.Thoughts, got.Text, got.Finish)
		}
	}
}

// gfeatAnswerer is a scripted chat upstream that answers text, streamed
// when the request asks for it (with usage), whole otherwise.
func gfeatAnswerer(f **fakeUpstream, text string) func(n int, w http.ResponseWriter, r *http.Request) {
	return func(n int, w http.ResponseWriter, r *http.Request) {
		if stream, _ := (*f).requests()[n-1].body["stream"].(bool); stream {
			streamEvents(w, 0, chunk(text[:len(text)/2]), chunk(text[len(text)/2:]),
				`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
				`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}`,
				"[DONE]")
			return
		}
		answerJSON(w, 200, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":`+
			strconvQuote(text)+`},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}`)
	}
}

// TestGeminiFeatureCanaryShadow: a Gemini client's requests to an alias
// with a 30% canary (keyed by a header) and a 100% shadow: the canary
// answers exactly the users whose bucket is below 30, each user always on
// the same side, and the Gemini client gets that side's answer; the
// shadow gets a copy of every request (the question, its model, streamed
// as the client asked), and no client ever sees its answer. The status
// view counts the copies and the canary's samples.
func TestGeminiFeatureCanaryShadow(t *testing.T) {
	const primary, canaried, shadowed = "Answered by the primary target.", "Answered by the canary target.", "Answered by the shadow target."
	var a, c, s *fakeUpstream
	a = newFakeUpstream(t, gfeatAnswerer(&a, primary))
	c = newFakeUpstream(t, gfeatAnswerer(&c, canaried))
	s = newFakeUpstream(t, gfeatAnswerer(&s, shadowed))
	startRelay(t, fmt.Sprintf(`llm_relay {
		key %s
		upstream a %s {
			api chat
		}
		upstream c %s {
			api chat
		}
		upstream s %s {
			api chat
		}
		model gemini-canary {
			to a model-a
			canary c model-c 30 {
				key header X-User
			}
			shadow s shadow-model 100 {
				max_concurrent 4
			}
		}
	}`, geminiRelayKey, a.v1(), c.v1(), s.v1()))

	const users = 40
	inCanary := 0
	for i := range users {
		u := fmt.Sprintf("user-%03d@example.com", i)
		want, wantText := "a", primary
		if canary.Bucket(u) < 30 {
			want, wantText = "c", canaried
			inCanary++
		}
		question := fmt.Sprintf("question %d", i)
		body := geminiAsk(question, "")
		var got gfeatStream
		switch i % 3 {
		case 0:
			got, _ = geminiWhole(t, "gemini-canary", body, "X-User", u)
		case 1:
			got = geminiStreamOf(t, "gemini-canary", true, body, "X-User", u)
		default:
			got = geminiStreamOf(t, "gemini-canary", false, body, "X-User", u)
		}
		if got.status != 200 || got.header.Get("X-Relay-Upstream") != want || got.answer() != wantText {
			t.Errorf("%s (bucket %.2f, request %d): %d from %q: %q; want %s's answer", u, canary.Bucket(u), i, got.status, got.header.Get("X-Relay-Upstream"), got.answer(), want)
		}
		if strings.Contains(got.raw, "shadow") {
			t.Errorf("request %d: the shadow's answer reached the client:\n%s", i, got.raw)
		}
		// One at a time: each copy is settled before the next request,
		// so max_concurrent never drops one.
		waitFor(t, 5*time.Second, "the shadow copy", func() bool {
			doc := getRelayStatus(t)
			return len(doc.Shadows) == 1 && doc.Shadows[0].Stats.OK+doc.Shadows[0].Stats.Failed == int64(i+1)
		})
		sreq := s.requests()[i]
		msgs, _ := json.Marshal(sreq.body["messages"])
		stream, _ := sreq.body["stream"].(bool)
		if sreq.body["model"] != "shadow-model" || !strings.Contains(string(msgs), `"`+question+`"`) || stream != (i%3 != 0) {
			t.Errorf("shadow copy %d: %v", i, sreq.body)
		}
	}
	if inCanary == 0 || inCanary == users {
		t.Fatalf("%d of %d users in the canary: the test shows nothing", inCanary, users)
	}
	if len(c.requests()) != inCanary || len(a.requests()) != users-inCanary || len(s.requests()) != users {
		t.Errorf("requests: primary %d, canary %d, shadow %d; want %d, %d, %d", len(a.requests()), len(c.requests()), len(s.requests()), users-inCanary, inCanary, users)
	}
	// The same user, the same side.
	for i := range 10 {
		u := fmt.Sprintf("user-%03d@example.com", i)
		got, _ := geminiWhole(t, "gemini-canary", geminiAsk("again", ""), "X-User", u)
		if want := map[bool]string{true: "c", false: "a"}[canary.Bucket(u) < 30]; got.header.Get("X-Relay-Upstream") != want {
			t.Errorf("%s again: served by %q, want %s", u, got.header.Get("X-Relay-Upstream"), want)
		}
	}
	doc := getRelayStatus(t)
	if len(doc.Canaries) != 1 || doc.Canaries[0].State != "active" || doc.Canaries[0].TotalSamples == 0 || doc.Canaries[0].TotalFailed != 0 {
		t.Errorf("canaries: %+v", doc.Canaries)
	}
	if st := doc.Shadows[0].Stats; st.OK < users || st.Failed != 0 || st.Compared < users {
		t.Errorf("shadow stats %+v; want at least %d ok and compared", st, users)
	}
}

// TestGeminiFeatureMetricsAndStatus: a Gemini client's requests are
// counted as any client's: llm_relay_requests_total, attempts, time to
// first token, duration, tokens (prompt, completion, reasoning) and cost
// by the key's name and the alias, in Caddy's registry on the admin
// /metrics. (The metrics carry no client-dialect label, for any dialect:
// the log line's "api" says it, "gemini" here.) The status view counts
// them too: the key's requests and tokens, the target's samples, the
// streams; the status page (HTML) names the alias.
func TestGeminiFeatureMetricsAndStatus(t *testing.T) {
	logFile := startRelay(t, `llm_relay {
		key `+geminiRelayKey+` gemfeat
		upstream good http://127.0.0.1:9170/good/v1 {
			api chat
		}
		model gemini-metered {
			to good sim-reasoner
		}
		price sim-reasoner {
			input 1
			output 2
		}
	}`, gfeatSims)
	reasoning, content := simTexts(11, 12, 40)
	m0 := scrapeMetrics(t)
	body := geminiAsk("hi", `{"includeThoughts":true,"thinkingBudget":2048}`)
	whole, _ := geminiWhole(t, "gemini-metered", body)
	sse := geminiStreamOf(t, "gemini-metered", true, body)
	arr := geminiStreamOf(t, "gemini-metered", false, body)
	for how, s := range map[string]gfeatStream{"whole": whole, "sse": sse, "array": arr} {
		if s.status != 200 || s.thought() != reasoning || s.answer() != content {
			t.Fatalf("%s: %d thoughts %q text %q", how, s.status, s.thought(), s.answer())
		}
	}
	// The log lines are written as each request ends, and the metrics with
	// them: wait for the third.
	waitFor(t, 5*time.Second, "three log lines", func() bool {
		return strings.Count(readLog(t, logFile), `"alias":"gemini-metered","api":"gemini"`) == 3
	})
	m1 := scrapeMetrics(t)
	delta := func(series string) float64 { return metricValue(t, m1, series) - metricValue(t, m0, series) }
	for series, want := range map[string]float64{
		`llm_relay_requests_total{alias="gemini-metered",outcome="ok",upstream="good"}`:  3,
		`llm_relay_attempts_total{result="ok",upstream="good"}`:                          3,
		`llm_relay_time_to_first_token_seconds_count{upstream="good"}`:                   3,
		`llm_relay_request_duration_seconds_count{alias="gemini-metered"}`:               3,
		`llm_relay_tokens_total{alias="gemini-metered",key="gemfeat",kind="completion"}`: 3 * 52,
		`llm_relay_tokens_total{alias="gemini-metered",key="gemfeat",kind="reasoning"}`:  3 * 12,
	} {
		if got := delta(series); got != want {
			t.Errorf("%s: +%v, want +%v", series, got, want)
		}
	}
	if got := delta(`llm_relay_tokens_total{alias="gemini-metered",key="gemfeat",kind="prompt"}`); got < 3 {
		t.Errorf("prompt tokens: +%v", got)
	}
	if got := delta(`llm_relay_cost_usd_total{key="gemfeat"}`); got <= 0 {
		t.Errorf("cost: +%v", got)
	}

	var st struct {
		Keys []struct {
			Key      string  `json:"key"`
			Requests int64   `json:"requests"`
			SpentUSD float64 `json:"spent_usd"`
			Tokens   struct {
				Prompt, Completion, Reasoning int64
			} `json:"tokens"`
		} `json:"keys"`
		Targets []struct {
			Upstream string `json:"upstream"`
			Samples  int    `json:"samples"`
		} `json:"targets"`
		Streams []struct {
			Alias     string `json:"alias"`
			Key       string `json:"key"`
			EventsOut int    `json:"events_out"`
		} `json:"streams"`
	}
	raw := getStatusRaw(t, adminStatusURL)
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range st.Keys {
		if k.Key == "gemfeat" {
			found = true
			if k.Requests != 3 || k.Tokens.Completion != 3*52 || k.Tokens.Reasoning != 3*12 || k.Tokens.Prompt < 3 || k.SpentUSD <= 0 {
				t.Errorf("status key gemfeat: %+v; want 3 requests, %d completion and %d reasoning tokens, a spend", k, 3*52, 3*12)
			}
		}
	}
	if !found {
		t.Errorf("no key gemfeat in the status:\n%s", raw)
	}
	if len(st.Targets) != 1 || st.Targets[0].Upstream != "good" || st.Targets[0].Samples != 3 {
		t.Errorf("status targets %+v; want good with 3 samples", st.Targets)
	}
	streams := 0
	for _, v := range st.Streams {
		if v.Alias == "gemini-metered" && v.Key == "gemfeat" && v.EventsOut > 0 {
			streams++
		}
	}
	if streams != 2 {
		t.Errorf("the status shows %d gemini-metered streams, want 2: %+v", streams, st.Streams)
	}
	if page := getStatusPage(t); !strings.Contains(page, "gemini-metered") || !strings.Contains(page, "gemfeat") {
		t.Errorf("the status page does not name the alias and the key:\n%s", page)
	}
}

// TestGeminiFeatureEffort: a Gemini client's thinkingConfig reaches the
// target as the target's own effort or thinking (a budget by the table
// in docs/gemini.md, a level by its name: a chat target's
// reasoning_effort, an anthropic target's thinking budget), and the
// relay's adaptive_effort picks one by the prompt's size when the client
// set none (no thinkingConfig, or a dynamic budget), and leaves the
// client's own alone.
func TestGeminiFeatureEffort(t *testing.T) {
	u := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) { answerJSON(w, 200, okCompletion) })
	ua := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`)
	})
	logFile := startRelay(t, `llm_relay {
		key `+geminiRelayKey+`
		upstream u `+u.v1()+` {
			api chat
		}
		upstream ua `+ua.v1()+` {
			api anthropic
		}
		model gemini-effort {
			to u m
		}
		model gemini-effort-anth {
			to ua m
		}
		adaptive_effort {
			below 100 high
			below 2000 medium
			else low
		}
	}`)
	short, long := "word ", strings.Repeat("word ", 800)
	cases := []struct {
		question, thinking string
		want               string // the chat target's reasoning_effort
		wantBudget         float64
	}{
		{short, `{"thinkingBudget":2048}`, "low", 2048},
		{short, `{"thinkingBudget":8000,"includeThoughts":true}`, "medium", 8192},
		{short, `{"thinkingLevel":"HIGH"}`, "high", 24576},
		{short, `{"thinkingBudget":500}`, "minimal", 1024},
		{long, `{"thinkingBudget":20000}`, "high", 24576}, // the client's own, not adaptive's
		{short, ``, "high", 24576},                        // adaptive: a short prompt
		{long, ``, "medium", 8192},                        // adaptive: a longer one
		{short, `{"thinkingBudget":-1}`, "high", 24576},   // dynamic: none set, adaptive's
	}
	for i, c := range cases {
		for _, model := range []string{"gemini-effort", "gemini-effort-anth"} {
			got, _ := geminiWhole(t, model, geminiAsk(c.question, c.thinking))
			if got.status != 200 || got.answer() != "hello" {
				t.Fatalf("case %d %s: %d %s", i, model, got.status, got.raw)
			}
		}
		seen := u.requests()[i].body
		if seen["reasoning_effort"] != c.want {
			t.Errorf("case %d (%s): the chat target got reasoning_effort %v, want %s", i, c.thinking, seen["reasoning_effort"], c.want)
		}
		th, _ := ua.requests()[i].body["thinking"].(map[string]any)
		if th["type"] != "enabled" || th["budget_tokens"] != c.wantBudget {
			t.Errorf("case %d (%s): the anthropic target got thinking %v, want a budget of %v", i, c.thinking, th, c.wantBudget)
		}
	}
	// A budget of 0 switches thinking off.
	geminiWhole(t, "gemini-effort", geminiAsk(short, `{"thinkingBudget":0}`))
	geminiWhole(t, "gemini-effort-anth", geminiAsk(short, `{"thinkingBudget":0}`))
	if e := u.requests()[len(cases)].body["reasoning_effort"]; e != "none" {
		t.Errorf("thinkingBudget 0: the chat target got reasoning_effort %v, want none", e)
	}
	if th, ok := ua.requests()[len(cases)].body["thinking"].(map[string]any); ok && th["type"] != "disabled" {
		t.Errorf("thinkingBudget 0: the anthropic target got thinking %v", th)
	}
	waitFor(t, 5*time.Second, "the log lines", func() bool {
		return strings.Count(readLog(t, logFile), `"api":"gemini"`) == 2*len(cases)+2
	})
	mustContain(t, readLog(t, logFile), `"reasoning_effort":"medium"`)
}

// TestGeminiFeatureReasoningBudget: the relay's reasoning_budget holds a
// Gemini client's stream: truncate cuts the thoughts short and the answer
// comes whole; failover goes on to the next target, whose reasoning and
// answer follow on one clean stream; error ends the stream with an error
// in Google's shape and no finishReason; X-Relay-Reasoning-Budget lowers
// it per request. A key's reasoning budget, spent, refuses a Gemini
// client in Google's shape.
func TestGeminiFeatureReasoningBudget(t *testing.T) {
	logFile := startRelay(t, `llm_relay {
		key `+geminiRelayKey+`
		upstream big http://127.0.0.1:9083/big/v1 {
			api chat
		}
		upstream small http://127.0.0.1:9083/small/v1 {
			api chat
		}
		model gemini-truncate {
			to big sim-reasoner
			reasoning_budget 10 truncate
		}
		model gemini-failover {
			to big sim-reasoner
			to small sim-reasoner
			reasoning_budget 10 failover
		}
		model gemini-error {
			to big sim-reasoner
			reasoning_budget 10 error
		}
		model gemini-roomy {
			to big sim-reasoner
			reasoning_budget 1000
		}
		key sk-gem-reason gem-reason {
			reasoning_budget 5 per day
		}
		model gemini-small {
			to small sim-reasoner
		}
	}`, usageSims)
	bigR, bigC := simTexts(3, 60, 10)
	smallR, smallC := simTexts(4, 3, 10)
	body := geminiAsk("hi", `{"includeThoughts":true,"thinkingBudget":4096}`)
	for _, sse := range []bool{true, false} {
		s := geminiStreamOf(t, "gemini-truncate", sse, body)
		if f, only := s.finish(); s.status != 200 || f != "STOP" || !only || len(s.errors) > 0 || s.answer() != bigC ||
			s.thought() == "" || !strings.HasPrefix(bigR, s.thought()) || len(s.thought()) >= len(bigR) {
			t.Errorf("truncate (sse %v): %d, finish %q, errors %v, %d of %d bytes of thoughts, text %q", sse, s.status, f, s.errors, len(s.thought()), len(bigR), s.answer())
		}

		s = geminiStreamOf(t, "gemini-failover", sse, body)
		before, _ := strings.CutSuffix(s.thought(), smallR)
		if f, only := s.finish(); s.status != 200 || f != "STOP" || !only || len(s.errors) > 0 || s.answer() != smallC ||
			!strings.HasSuffix(s.thought(), smallR) || !strings.HasPrefix(bigR, before) {
			t.Errorf("failover (sse %v): %d, finish %q, errors %v, thoughts %q, text %q (want %q)", sse, s.status, f, s.errors, s.thought(), s.answer(), smallC)
		}

		s = geminiStreamOf(t, "gemini-error", sse, body)
		if f, _ := s.finish(); s.status != 200 || f != "" || len(s.errors) != 1 || s.answer() != "" || !strings.Contains(s.errors[0], `"status":"`) || !strings.Contains(s.errors[0], `"code":`) {
			t.Errorf("error (sse %v): %d, finish %q, errors %v, text %q:\n%s", sse, s.status, f, s.errors, s.answer(), s.raw)
		}

		s = geminiStreamOf(t, "gemini-roomy", sse, body)
		if s.thought() != bigR || s.answer() != bigC {
			t.Errorf("roomy (sse %v): a budget of 1000 cut the thoughts: %d of %d bytes", sse, len(s.thought()), len(bigR))
		}
		s = geminiStreamOf(t, "gemini-roomy", sse, body, "X-Relay-Reasoning-Budget", "5")
		if f, only := s.finish(); f != "STOP" || !only || s.answer() != bigC || len(s.thought()) >= len(bigR) || !strings.HasPrefix(bigR, s.thought()) {
			t.Errorf("X-Relay-Reasoning-Budget 5 (sse %v): finish %q, %d of %d bytes of thoughts, text %q", sse, f, len(s.thought()), len(bigR), s.answer())
		}
	}
	// A budget header that is no number: refused in Google's shape.
	readGeminiError(t, geminiPost(t, "/v1beta/models/gemini-roomy:streamGenerateContent?alt=sse", body,
		"x-goog-api-key", geminiRelayKey, "X-Relay-Reasoning-Budget", "lots"), 400, "INVALID_ARGUMENT")
	waitFor(t, 5*time.Second, "the failover log lines", func() bool {
		return strings.Count(readLog(t, logFile), `"reasoning_budget_failovers":1`) == 2
	})

	// A key's own reasoning budget (3 reasoning tokens a request: 5 is
	// used up by the second): refused in Google's shape, until midnight.
	for i := range 2 {
		if s, _ := geminiWhole(t, "gemini-small", body, "x-goog-api-key", "sk-gem-reason"); s.status != 200 || s.thought() != smallR {
			t.Fatalf("key reasoning budget, request %d: %d %s", i+1, s.status, s.raw)
		}
	}
	resp := geminiPost(t, "/v1beta/models/gemini-small:streamGenerateContent?alt=sse", body, "x-goog-api-key", "sk-gem-reason")
	ra := resp.Header.Get("Retry-After")
	if msg := readGeminiError(t, resp, 429, "RESOURCE_EXHAUSTED"); !strings.Contains(msg, "reasoning budget of 5 tokens") || ra == "" {
		t.Errorf("over the key's reasoning budget: %q, Retry-After %q", msg, ra)
	}
}

// TestGeminiFeatureLimitsAndCapacity: every refusal of the relay's key
// limits and capacity stages reaches a Gemini client in Google's shape,
// {"error":{"code","message","status"}}, with its Retry-After: a key's
// max_concurrent while its Gemini stream runs (429 RESOURCE_EXHAUSTED),
// a target at its max_concurrent (503 UNAVAILABLE, shed), a key's tpm
// and its spend budget (429 RESOURCE_EXHAUSTED); a Gemini stream in
// flight is counted by both until it ends. (A key's rpm:
// TestGeminiClientKeysAndRefusals.)
func TestGeminiFeatureLimitsAndCapacity(t *testing.T) {
	held := newHeldUpstream(t)
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":1,"total_tokens":101}}`)
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		key %s
		key sk-gem-conc conc {
			max_concurrent 1
		}
		key sk-gem-tpm tpm {
			tpm 40
		}
		key sk-gem-budget spender {
			budget 0.00001 per day
		}
		upstream held %s {
			api chat
			max_concurrent 1
		}
		upstream ok %s {
			api chat
		}
		model gemini-held {
			to held m
		}
		model gemini-ok {
			to ok priced
		}
		price priced {
			input 1
			output 1
		}
	}`, geminiRelayKey, held.v1(), up.v1()))
	body := geminiAsk("hi", "")

	// A Gemini stream in flight, on the key with max_concurrent 1 and on
	// the target with max_concurrent 1.
	streamDone := make(chan string, 1)
	go func() {
		resp, err := geminiDo("/v1beta/models/gemini-held:streamGenerateContent?alt=sse", body, "x-goog-api-key", "sk-gem-conc")
		if err != nil {
			streamDone <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		streamDone <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	waitFor(t, 10*time.Second, "the Gemini stream in flight", func() bool { return len(held.requests()) == 1 })

	refused := func(what string, resp *http.Response, status int, name, retryAfter, inMessage string) {
		t.Helper()
		ra := resp.Header.Get("Retry-After")
		msg := readGeminiError(t, resp, status, name)
		if retryAfter == "" && ra == "" || retryAfter != "" && ra != retryAfter {
			t.Errorf("%s: Retry-After %q, want %q", what, ra, cmp.Or(retryAfter, "one"))
		}
		if !strings.Contains(msg, inMessage) {
			t.Errorf("%s: message %q, want it to say %q", what, msg, inMessage)
		}
	}
	for _, path := range []string{"/v1beta/models/gemini-ok:generateContent", "/v1beta/models/gemini-ok:streamGenerateContent?alt=sse"} {
		refused("key max_concurrent "+path, geminiPost(t, path, body, "x-goog-api-key", "sk-gem-conc"), 429, "RESOURCE_EXHAUSTED", "1", "max_concurrent")
	}
	for _, path := range []string{"/v1beta/models/gemini-held:generateContent", "/v1beta/models/gemini-held:streamGenerateContent?alt=sse", "/v1beta/models/gemini-held:streamGenerateContent"} {
		refused("shed "+path, geminiPost(t, path, body, "x-goog-api-key", geminiRelayKey), 503, "UNAVAILABLE", "1", "max_concurrent 1")
	}
	if n := len(held.requests()); n != 1 {
		t.Errorf("the held target got %d requests, want 1", n)
	}
	held.free()
	var s gfeatStream
	select {
	case got := <-streamDone:
		status, raw, _ := strings.Cut(got, " ")
		if status != "200" || !strings.Contains(raw, `"text":"held"`) || !strings.Contains(raw, `"finishReason":"STOP"`) {
			t.Fatalf("the held Gemini stream: %s", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held Gemini stream did not end")
	}
	// Both free again once it ended.
	if s = geminiStreamOf(t, "gemini-held", true, body, "x-goog-api-key", "sk-gem-conc"); s.status != 200 || s.answer() != "held" {
		t.Errorf("after the stream ended: %d %s", s.status, s.raw)
	}

	// tpm: a prompt of more than the minute passes on a full bucket (the
	// usage says 100 tokens); the next waits out the debt.
	if s, _ = geminiWhole(t, "gemini-ok", geminiAsk(strings.Repeat("word ", 80), ""), "x-goog-api-key", "sk-gem-tpm"); s.status != 200 {
		t.Fatalf("first tpm request: %d %s", s.status, s.raw)
	}
	refused("tpm", geminiPost(t, "/v1beta/models/gemini-ok:streamGenerateContent?alt=sse", body, "x-goog-api-key", "sk-gem-tpm"), 429, "RESOURCE_EXHAUSTED", "", "40 tokens a minute")

	// The spend budget: the first request spends it ($0.000101 > $0.00001).
	if s, _ = geminiWhole(t, "gemini-ok", body, "x-goog-api-key", "sk-gem-budget"); s.status != 200 {
		t.Fatalf("first budget request: %d %s", s.status, s.raw)
	}
	refused("budget", geminiPost(t, "/v1beta/models/gemini-ok:generateContent", body, "x-goog-api-key", "sk-gem-budget"), 429, "RESOURCE_EXHAUSTED", "", "budget")
}

// TestGeminiFeatureUsageAndCost: a Gemini client's answer carries the
// target's usage as usageMetadata (prompt, candidates without the
// thoughts, thoughts, total), streamed and whole; the relay's log line
// has the same tokens and the cost by the price table, and
// X-Relay-Cost-USD is on a whole answer. An answer whose target reports
// no usage is never free: the relay estimates it, logs it as estimated,
// and the Gemini client reads that estimate in its usageMetadata (as a
// Messages or Responses client reads it in its own dialect).
func TestGeminiFeatureUsageAndCost(t *testing.T) {
	var quiet *fakeUpstream
	quiet = newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if stream, _ := quiet.requests()[n-1].body["stream"].(bool); !stream {
			answerJSON(w, 200, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, general Kenobi."},"finish_reason":"stop"}]}`)
			return
		}
		streamEvents(w, 0, chunk("Hello there, "), chunk("general Kenobi."), "[DONE]")
	})
	logFile := startRelay(t, `llm_relay {
		key `+geminiRelayKey+` gemusage
		upstream good http://127.0.0.1:9170/good/v1 {
			api chat
		}
		upstream goodanth http://127.0.0.1:9170/good/v1 {
			api anthropic
		}
		upstream quiet `+quiet.v1()+` {
			api chat
		}
		model gemini-usage {
			to good sim-reasoner
		}
		model gemini-usage-anth {
			to goodanth sim-reasoner
		}
		model gemini-quiet {
			to quiet m
		}
		price sim-reasoner {
			input 1000
			output 2000
		}
	}`, gfeatSims)
	body := geminiAsk("what does it cost?", `{"includeThoughts":true,"thinkingBudget":2048}`)
	num := func(u map[string]any, k string) int { f, _ := u[k].(float64); return int(f) }

	whole, resp := geminiWhole(t, "gemini-usage", body)
	sse := geminiStreamOf(t, "gemini-usage", true, body)
	arr := geminiStreamOf(t, "gemini-usage", false, body)
	var prompt int
	for how, s := range map[string]gfeatStream{"whole": whole, "sse": sse, "array": arr} {
		u := s.usage
		if s.status != 200 || u == nil {
			t.Fatalf("%s: %d, no usageMetadata:\n%s", how, s.status, s.raw)
		}
		p, c, th, tot := num(u, "promptTokenCount"), num(u, "candidatesTokenCount"), num(u, "thoughtsTokenCount"), num(u, "totalTokenCount")
		if p <= 0 || c != 40 || th != 12 || tot != p+c+th {
			t.Errorf("%s: usageMetadata %v; want 40 candidates, 12 thoughts tokens and the total", how, u)
		}
		prompt = p
	}
	// $1000 / $2000 per million: (prompt×1000 + 52×2000) / 1e6.
	if got, want := resp.Header.Get("X-Relay-Cost-USD"), wantCost(prompt, 52, 1000, 2000); got != want {
		t.Errorf("X-Relay-Cost-USD %q, want %q", got, want)
	}
	// Anthropic counts no thoughts apart: they are in the candidates.
	s := geminiStreamOf(t, "gemini-usage-anth", true, body)
	if u := s.usage; u == nil || num(u, "promptTokenCount") <= 0 || num(u, "candidatesTokenCount") != 52 || num(u, "totalTokenCount") != num(u, "promptTokenCount")+52 {
		t.Errorf("anthropic target: usageMetadata %v", s.usage)
	}

	// A target that reports no usage: the Gemini client reads the
	// relay's estimate, as a Messages or Responses client does (a quarter
	// of the answer's 28 runes), and the log line says it is one.
	qWhole, _ := geminiWhole(t, "gemini-quiet", body)
	for how, q := range map[string]gfeatStream{"whole": qWhole, "sse": geminiStreamOf(t, "gemini-quiet", true, body)} {
		u := q.usage
		if q.status != 200 || q.answer() != "Hello there, general Kenobi." || u == nil ||
			num(u, "promptTokenCount") <= 0 || num(u, "candidatesTokenCount") != 7 || num(u, "totalTokenCount") != num(u, "promptTokenCount")+7 {
			t.Errorf("quiet target %s: %d %q, usageMetadata %v; want the relay's estimate (7 candidates tokens)", how, q.status, q.answer(), u)
		}
	}

	waitFor(t, 5*time.Second, "the log lines", func() bool {
		return strings.Count(readLog(t, logFile), `"api":"gemini"`) == 6
	})
	lines := map[string]int{}
	for _, e := range logEntries(t, logFile) {
		if e.str("msg") != "relayed" || e.str("api") != "gemini" {
			continue
		}
		lines[e.str("alias")]++
		completion, _ := e["completion_tokens"].(float64)
		promptN, _ := e["prompt_tokens"].(float64)
		estimated, _ := e["usage_estimated"].(bool)
		switch e.str("alias") {
		case "gemini-usage":
			reasoning, _ := e["reasoning_tokens"].(float64)
			if int(promptN) != prompt || completion != 52 || reasoning != 12 || estimated || e.str("cost_usd") != wantCost(prompt, 52, 1000, 2000) {
				t.Errorf("log line %v: want %d prompt, 52 completion (12 reasoning) tokens, not estimated, cost %s", e, prompt, wantCost(prompt, 52, 1000, 2000))
			}
		case "gemini-usage-anth":
			// Anthropic's usage counts no thinking apart: the relay
			// estimates that part from the thinking's text, and says so.
			reasoning, _ := e["reasoning_tokens"].(float64)
			if promptN <= 0 || completion != 52 || reasoning <= 0 || e.str("cost_usd") == "" {
				t.Errorf("log line %v", e)
			}
		case "gemini-quiet":
			if promptN <= 0 || completion <= 0 || !estimated {
				t.Errorf("a stream without usage: log line %v; want estimated, non-zero tokens", e)
			}
		}
	}
	// Each request's line was checked above, none passed over.
	if want := map[string]int{"gemini-usage": 3, "gemini-usage-anth": 1, "gemini-quiet": 2}; !maps.Equal(lines, want) {
		t.Errorf("relayed log lines by alias %v, want %v", lines, want)
	}
}
