package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// postForm sends a chat completion request with the reasoning form
// header set to form (none if form is empty).
func postForm(t *testing.T, ts *httptest.Server, form, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if form != "" {
		req.Header.Set(ReasoningFormHeader, form)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// taggedStream is what a stream in a tags form carried.
type taggedStream struct {
	chunks []string        // content of each token delta, in order
	usage  json.RawMessage // of the usage chunk, if any
}

// readTagged reads a whole chat stream and checks that it carries no
// reasoning_content: every token delta is content.
func readTagged(t *testing.T, resp *http.Response) taggedStream {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	events, err := readEvents(resp.Body)
	if err != nil {
		t.Fatalf("reading stream: %v", err)
	}
	if len(events) < 3 || events[len(events)-1].data != "[DONE]" {
		t.Fatalf("stream %v does not end with [DONE]", events)
	}
	var out taggedStream
	for i, ev := range events[:len(events)-1] {
		var c struct {
			Choices []struct {
				Delta        map[string]json.RawMessage `json:"delta"`
				FinishReason *string                    `json:"finish_reason"`
			} `json:"choices"`
			Usage json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			t.Fatalf("bad chunk %s: %v", ev.data, err)
		}
		if len(c.Choices) == 0 {
			out.usage = c.Usage
			continue
		}
		d := c.Choices[0].Delta
		if _, ok := d["reasoning_content"]; ok {
			t.Fatalf("reasoning_content in a tags form: %s", ev.data)
		}
		if i == 0 || c.Choices[0].FinishReason != nil || d["content"] == nil {
			continue // the role chunk, the finish chunk, tool call deltas
		}
		var s string
		if err := json.Unmarshal(d["content"], &s); err != nil || s == "" {
			t.Fatalf("token delta with content %s", d["content"])
		}
		out.chunks = append(out.chunks, s)
	}
	return out
}

// plainCompletion is a non-stream answer as the tags tests read it.
type plainCompletion struct {
	Choices []struct {
		Message      map[string]json.RawMessage `json:"message"`
		FinishReason string                     `json:"finish_reason"`
	} `json:"choices"`
	Usage map[string]json.RawMessage `json:"usage"`
}

func readCompletion(t *testing.T, resp *http.Response) plainCompletion {
	t.Helper()
	var c plainCompletion
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 || len(c.Choices) != 1 {
		t.Fatalf("status %d, %v: %+v", resp.StatusCode, err, c)
	}
	return c
}

func (c plainCompletion) content(t *testing.T) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(c.Choices[0].Message["content"], &s); err != nil {
		t.Fatalf("content %s: %v", c.Choices[0].Message["content"], err)
	}
	return s
}

// wantTagged spells out each form's content, independently of
// TaggedContent.
func wantTagged(form, reasoning, answer string) string {
	if form == ReasoningTags {
		return "<think>\n" + reasoning + "\n</think>\n\n" + answer
	}
	return reasoning + "\n</think>\n\n" + answer
}

// checkPlainUsage checks a tags form's usage: reasoning and answer both
// count as completion tokens, and there is no reasoning_tokens detail.
func checkPlainUsage(t *testing.T, raw []byte, prompt, completion int) {
	t.Helper()
	var u map[string]any
	if err := json.Unmarshal(raw, &u); err != nil {
		t.Fatalf("usage %s: %v", raw, err)
	}
	if _, ok := u["completion_tokens_details"]; ok || u["prompt_tokens"] != float64(prompt) ||
		u["completion_tokens"] != float64(completion) || u["total_tokens"] != float64(prompt+completion) {
		t.Errorf("usage %s, want %d prompt and %d completion tokens and no completion_tokens_details", raw, prompt, completion)
	}
}

const usageStreamBody = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello world!"}]}`

// TestTaggedStreamEqualsContent checks, for several seeds and both tags
// forms, that the streamed content deltas join to the non-stream
// content, and both to the tagged texts.
func TestTaggedStreamEqualsContent(t *testing.T) {
	for _, form := range []string{ReasoningTags, ReasoningTagsUnopened} {
		for seed := int64(1); seed <= 5; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", form, seed), func(t *testing.T) {
				cfg := Config{Seed: seed, ReasoningTokens: new(7), ContentTokens: new(5), ReasoningPattern: fast, ContentPattern: fast, ReasoningForm: form}
				_, ts := startServer(t, cfg)
				r, a := Texts(cfg)
				want := wantTagged(form, strings.Join(r, ""), strings.Join(a, ""))
				if got := TaggedContent(form, strings.Join(r, ""), strings.Join(a, "")); got != want {
					t.Errorf("TaggedContent = %q, want %q", got, want)
				}

				st := readTagged(t, postForm(t, ts, "", usageStreamBody))
				if got := strings.Join(st.chunks, ""); got != want {
					t.Errorf("stream content %q\nwant %q (chunks %q)", got, want, st.chunks)
				}
				checkPlainUsage(t, st.usage, 3, len(r)+len(a))

				c := readCompletion(t, postForm(t, ts, "", `{"model":"m","messages":[{"role":"user","content":"hello world!"}]}`))
				if got := c.content(t); got != want {
					t.Errorf("non-stream content %q, want %q", got, want)
				}
				if _, ok := c.Choices[0].Message["reasoning_content"]; ok || c.Choices[0].FinishReason != "stop" {
					t.Errorf("message %v, finish %q", c.Choices[0].Message, c.Choices[0].FinishReason)
				}
				raw, _ := json.Marshal(c.Usage)
				checkPlainUsage(t, raw, 3, len(r)+len(a))
			})
		}
	}
}

// tagCut reports whether the chunk boundaries fall strictly inside the
// tag word w ("<think>" or "</think>") somewhere in the joined text.
func tagCut(chunks []string, w string) bool {
	text := strings.Join(chunks, "")
	cuts := map[int]bool{}
	off := 0
	for _, c := range chunks {
		off += len(c)
		cuts[off] = true
	}
	for i := 0; ; {
		j := strings.Index(text[i:], w)
		if j < 0 {
			return false
		}
		for k := i + j + 1; k < i+j+len(w); k++ {
			if cuts[k] {
				return true
			}
		}
		i += j + len(w)
	}
}

// TestTagsSplitAcrossChunks proves the cutting happens: across seeds, some
// stream cuts `<think>` and some `</think>` inside the word, some sends a
// tag word whole, some glues the closing tag to reasoning or answer text,
// and some sends the blank line after `</think>` on its own.
func TestTagsSplitAcrossChunks(t *testing.T) {
	var openCut, closeCut, whole, gluedReasoning, gluedAnswer, blankAlone bool
	for seed := int64(1); seed <= 16; seed++ {
		cfg := Config{Seed: seed, ReasoningTokens: new(4), ContentTokens: new(3), ReasoningPattern: fast, ContentPattern: fast}
		_, ts := startServer(t, cfg)
		r, a := Texts(cfg)
		for _, form := range []string{ReasoningTags, ReasoningTagsUnopened} {
			chunks := readTagged(t, postForm(t, ts, form, streamBody)).chunks
			if got, want := strings.Join(chunks, ""), wantTagged(form, strings.Join(r, ""), strings.Join(a, "")); got != want {
				t.Fatalf("seed %d %s: content %q, want %q", seed, form, got, want)
			}
			openCut = openCut || tagCut(chunks, "<think>")
			closeCut = closeCut || tagCut(chunks, "</think>")
			whole = whole || slices.ContainsFunc(chunks, func(c string) bool { return strings.Contains(c, "</think>") })
			for i, c := range chunks {
				before, after, ok := strings.Cut(c, "</think>")
				if !ok {
					continue
				}
				gluedReasoning = gluedReasoning || strings.TrimPrefix(before, "\n") != ""
				gluedAnswer = gluedAnswer || strings.TrimPrefix(after, "\n\n") != ""
				blankAlone = blankAlone || (after == "" && i+1 < len(chunks) && chunks[i+1] == "\n\n")
			}
		}
	}
	if !openCut || !closeCut || !whole || !gluedReasoning || !gluedAnswer || !blankAlone {
		t.Errorf("over 16 seeds: <think> cut %v, </think> cut %v, </think> whole %v, glued to reasoning %v, glued to answer %v, blank line alone %v; want all",
			openCut, closeCut, whole, gluedReasoning, gluedAnswer, blankAlone)
	}
}

// TestTagCutsDeterministic checks the cut points are a function of the
// seed and the request number: two servers with the same seed cut their
// n-th requests alike.
func TestTagCutsDeterministic(t *testing.T) {
	cfg := Config{Seed: 11, ReasoningTokens: new(6), ContentTokens: new(4), ReasoningPattern: fast, ContentPattern: fast, ReasoningForm: ReasoningTags}
	var runs [2][][]string
	for i := range runs {
		_, ts := startServer(t, cfg)
		for range 4 {
			runs[i] = append(runs[i], readTagged(t, postForm(t, ts, "", streamBody)).chunks)
		}
	}
	for n := range runs[0] {
		if !slices.Equal(runs[0][n], runs[1][n]) {
			t.Errorf("request %d cut differently: %q and %q", n+1, runs[0][n], runs[1][n])
		}
	}
}

// TestTagsEmptyReasoning: with no reasoning tokens a tags form still
// sends the tags around an empty reasoning, as Qwen3 does when it does
// not think.
func TestTagsEmptyReasoning(t *testing.T) {
	cfg := Config{ReasoningTokens: new(0), ContentTokens: new(3), ReasoningPattern: fast, ContentPattern: fast}
	_, ts := startServer(t, cfg)
	_, a := Texts(cfg)
	for _, form := range []string{ReasoningTags, ReasoningTagsUnopened} {
		want := wantTagged(form, "", strings.Join(a, ""))
		if got := strings.Join(readTagged(t, postForm(t, ts, form, streamBody)).chunks, ""); got != want {
			t.Errorf("%s stream: %q, want %q", form, got, want)
		}
		if got := readCompletion(t, postForm(t, ts, form, `{"model":"m","messages":[]}`)).content(t); got != want {
			t.Errorf("%s: %q, want %q", form, got, want)
		}
	}
}

// TestTagsWithToolCall: a forced tool call in a tags form carries the
// tagged reasoning as content before the call.
func TestTagsWithToolCall(t *testing.T) {
	cfg := Config{Seed: 4, ReasoningTokens: new(5), ReasoningPattern: fast, ContentPattern: fast, ReasoningForm: ReasoningTagsUnopened}
	_, ts := startServer(t, cfg)
	r, _ := Texts(cfg)
	want := wantTagged(ReasoningTagsUnopened, strings.Join(r, ""), "")
	const tools = `"tools":[{"type":"function","function":{"name":"lookup"}}],"tool_choice":"required","messages":[{"role":"user","content":"hi"}]}`

	c := readCompletion(t, postForm(t, ts, "", `{"model":"m",`+tools))
	var calls []chatToolCall
	_ = json.Unmarshal(c.Choices[0].Message["tool_calls"], &calls)
	if got := c.content(t); got != want || c.Choices[0].FinishReason != "tool_calls" || len(calls) != 1 || calls[0].Function.Arguments != ToolInput {
		t.Errorf("content %q (want %q), finish %q, calls %+v", got, want, c.Choices[0].FinishReason, calls)
	}

	resp := postForm(t, ts, "", `{"model":"m","stream":true,`+tools)
	body, _ := io.ReadAll(resp.Body)
	st := readTagged(t, &http.Response{StatusCode: resp.StatusCode, Body: io.NopCloser(strings.NewReader(string(body)))})
	if got := strings.Join(st.chunks, ""); got != want || !strings.Contains(string(body), `"finish_reason":"tool_calls"`) ||
		!strings.Contains(string(body), `"tool_calls":[{"index":0`) {
		t.Errorf("stream content %q, want %q; body %s", got, want, body)
	}
}

// TestReasoningFormHeader checks the per-request override and its 400.
func TestReasoningFormHeader(t *testing.T) {
	cfg := Config{Seed: 2, ReasoningTokens: new(3), ContentTokens: new(2), ReasoningPattern: fast, ContentPattern: fast, ReasoningForm: ReasoningTags}
	s, ts := startServer(t, cfg)
	r, a := Texts(cfg)

	// The header selects fields on a server configured for tags.
	c := readCompletion(t, postForm(t, ts, ReasoningFields, `{"model":"m","messages":[]}`))
	var rc string
	_ = json.Unmarshal(c.Choices[0].Message["reasoning_content"], &rc)
	if c.content(t) != strings.Join(a, "") || rc != strings.Join(r, "") || c.Usage["completion_tokens_details"] == nil {
		t.Errorf("fields override: %v, usage %v", c.Choices[0].Message, c.Usage)
	}
	// And tags_unopened; no header means the configured form.
	if got, want := readCompletion(t, postForm(t, ts, ReasoningTagsUnopened, `{"model":"m","messages":[]}`)).content(t), wantTagged(ReasoningTagsUnopened, strings.Join(r, ""), strings.Join(a, "")); got != want {
		t.Errorf("tags_unopened override: %q, want %q", got, want)
	}
	if got, want := readCompletion(t, postForm(t, ts, "", `{"model":"m","messages":[]}`)).content(t), wantTagged(ReasoningTags, strings.Join(r, ""), strings.Join(a, "")); got != want {
		t.Errorf("configured form: %q, want %q", got, want)
	}

	for _, body := range []string{streamBody, `{"model":"m","messages":[]}`} {
		resp := postForm(t, ts, "xml", body)
		var e apiError
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusBadRequest ||
			resp.Header.Get("Content-Type") != "application/json" || e.Error.Type != "invalid_request_error" ||
			!strings.Contains(e.Error.Message, "X-Sim-Reasoning-Form") || !strings.Contains(e.Error.Message, `"xml"`) ||
			!strings.Contains(e.Error.Message, `"fields", "tags" or "tags_unopened"`) {
			t.Errorf("unknown form: %d %+v (%v)", resp.StatusCode, e, err)
		}
	}
	if n := s.Requests(); n != 5 {
		t.Errorf("%d requests counted, want 5", n)
	}
}

// TestTagsFaultAfterCountsEvents: in a tags form, error_after N still
// sends N data events (the role chunk and content deltas) before the
// error.
func TestTagsFaultAfterCountsEvents(t *testing.T) {
	for _, after := range []int{0, 1, 3, 6} {
		cfg := Config{ReasoningTokens: new(4), ContentTokens: new(4), ReasoningPattern: fast, ContentPattern: fast, ReasoningForm: ReasoningTags,
			Faults: []Fault{{Kind: FaultError, After: after}}}
		_, ts := startServer(t, cfg)
		events, err := readEvents(postForm(t, ts, "", streamBody).Body)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != after+1 || !strings.HasPrefix(events[after].data, `{"error":`) {
			t.Errorf("after %d: %d events, last %v", after, len(events), events[len(events)-1])
		}
	}
}

// TestTagsKeepPacing: a tags stream keeps the clustered pauses of the
// reasoning phase. Only lower bounds on gaps are asserted: the server
// cannot send a burst's first chunk before its pause has passed.
func TestTagsKeepPacing(t *testing.T) {
	p := Pattern{Kind: Clustered, Burst: 3, Pause: 60 * time.Millisecond, BurstSpread: time.Millisecond}
	cfg := Config{ReasoningTokens: new(12), ContentTokens: new(0), ReasoningPattern: p, ContentPattern: fast, ReasoningForm: ReasoningTagsUnopened}
	_, ts := startServer(t, cfg)
	start := time.Now()
	st := readTagged(t, postForm(t, ts, "", streamBody))
	// 12 pieces plus the closing tag make at least 12 chunks (the tag may
	// be glued to the last piece), 4 or more bursts of 3: 3 or more pauses.
	if len(st.chunks) < 12 {
		t.Fatalf("%d chunks: %q", len(st.chunks), st.chunks)
	}
	if d := time.Since(start); d < 180*time.Millisecond {
		t.Errorf("stream took %v, want >= 3 pauses of 60ms", d)
	}
}

func TestReasoningFormValidates(t *testing.T) {
	_, err := New(Config{ReasoningForm: "xml"})
	if err == nil || !strings.Contains(err.Error(), `reasoning form: unknown form "xml" (want "fields", "tags" or "tags_unopened")`) {
		t.Errorf("New = %v", err)
	}
	s, err := New(Config{})
	if err != nil || s.cfg.ReasoningForm != ReasoningFields {
		t.Errorf("default form %q, %v", s.cfg.ReasoningForm, err)
	}
}
