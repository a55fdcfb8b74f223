package llmrelay_test

// The relay's features for a Gemini client (issue 32, "Everything else,
// in the fourth dialect too"): a Gemini client is served through the
// relay's Chat path (gemini.go), so each feature the relay has for Chat
// clients is shown here to reach a Gemini client in Gemini's words, by
// plain HTTP on the Gemini API's paths (and the official @google/genai
// SDK where what it assembles matters), through a real Caddy in front of
// simulators and scripted upstreams on 127.0.0.1. This file's ports are
// 9170-9189.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

// gfeatSims runs this file's simulators on :9170: /paced/ a reasoning
// model whose reasoning and answer arrive in clusters (as
// messages_pacing_e2e_test.go's), /tags/ one that writes its reasoning
// inline between <think> tags (taggedSimSite's /tags/), /reason/ and
// /echo/ the two legs of a hand-off (handoffSimSite's), /drop/ and /good/
// the same answer, broken after 8 events and whole (contSite's), /big/ a
// model that reasons at length (usageSims').
const gfeatSims = `http://127.0.0.1:9170 {
	handle /paced/* {
		llm_simulator {
			seed 5
			reasoning_tokens 60
			content_tokens 40
			pattern clustered 20 250ms 1ms
		}
	}
	handle /tags/* {
		llm_simulator {
			seed 27
			reasoning_tokens 24
			content_tokens 16
			pattern steady 0
			reasoning_form tags
		}
	}
	handle /reason/* {
		llm_simulator {
			seed 28
			reasoning_tokens 24
			content_tokens 16
			pattern steady 0
		}
	}
	handle /echo/* {
		llm_simulator {
			seed 29
			content_tokens 8
			pattern steady 0
			echo handoff
		}
	}
	handle /drop/* {
		llm_simulator {
			seed 11
			reasoning_tokens 12
			content_tokens 40
			pattern steady 0
			drop_after 8
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
	handle /big/* {
		llm_simulator {
			seed 3
			reasoning_tokens 60
			content_tokens 10
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
// array; the status view's stream says split-reasoning; the official SDK
// assembles the same answer.
func TestGeminiFeatureSplitReasoning(t *testing.T) {
	logFile := startRelay(t, `llm_relay {
		key `+geminiRelayKey+`
		upstream paced http://127.0.0.1:9170/paced/v1 {
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
	}`, gfeatSims)
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

	requireNodeTool(t, filepath.Join("@google", "genai", "package.json"), "the @google/genai SDK")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node_modules is installed but node is not on PATH: %v", err)
	}
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
		upstream tags http://127.0.0.1:9170/tags/v1 {
			api chat
			reasoning_format tags
		}
		upstream rawtags http://127.0.0.1:9170/tags/v1 {
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
	}`, gfeatSims)
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

// gfeatHandoff: hand-off aliases as handoff_e2e_test.go's, on this
// file's simulators: baton reasons on a chat target and answers on an
// anthropic one (the reasoning as a prefill), baton-user answers on a
// chat one (the reasoning in a user turn).
const gfeatHandoff = `llm_relay {
	key ` + geminiRelayKey + `
	upstream reasoner http://127.0.0.1:9170/reason/v1 {
		api chat
	}
	upstream echo-claude http://127.0.0.1:9170/echo/v1 {
		api anthropic
	}
	upstream echo-chat http://127.0.0.1:9170/echo/v1 {
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
	logFile := startRelay(t, gfeatHandoff, gfeatSims)
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

	requireNodeTool(t, filepath.Join("@google", "genai", "package.json"), "the @google/genai SDK")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node_modules is installed but node is not on PATH: %v", err)
	}
	for _, mode := range []string{"create", "stream"} {
		var got struct{ Text, Thoughts, Finish string }
		runGeminiSDKRelay(t, node, "baton", mode, &got)
		if got.Thoughts != reasoning || got.Text != echoOf("prefill", reasoning) || got.Finish != "STOP" {
			t.Errorf("@google/genai %s: thoughts %q text %q finish %q", mode, got.Thoughts, got.Text, got.Finish)
		}
	}
}
