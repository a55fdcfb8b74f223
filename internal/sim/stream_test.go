package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestStreamReassemblesTexts(t *testing.T) {
	cfg := Config{Seed: 7, ReasoningPattern: fast, ContentPattern: fast}
	_, ts := startServer(t, cfg)
	resp := mustPost(t, ts, streamBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("Cache-Control %q", cc)
	}
	events, err := readEvents(resp.Body)
	if err != nil {
		t.Fatalf("reading stream: %v", err)
	}
	wantR, wantC := Texts(cfg)
	// role + reasoning + content + finish + [DONE]
	if got, want := len(events), 1+len(wantR)+len(wantC)+2; got != want {
		t.Fatalf("got %d events, want %d", got, want)
	}

	first := events[0].data
	if !strings.HasPrefix(first, `{"id":"chatcmpl-sim-1","object":"chat.completion.chunk","created":`) ||
		!strings.HasSuffix(first, `,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`) {
		t.Errorf("first chunk %s", first)
	}
	var reasoning, content []string
	for _, ev := range events[1 : len(events)-2] {
		if strings.Contains(ev.data, `"usage"`) {
			t.Errorf("usage without include_usage: %s", ev.data)
		}
		d := decodeChunk(t, ev.data).Choices[0].Delta
		switch {
		case d.ReasoningContent != nil && d.Content == nil:
			if len(content) > 0 {
				t.Fatalf("reasoning after content: %s", ev.data)
			}
			reasoning = append(reasoning, *d.ReasoningContent)
		case d.Content != nil && d.ReasoningContent == nil:
			content = append(content, *d.Content)
		default:
			t.Fatalf("unexpected delta %s", ev.data)
		}
	}
	if strings.Join(reasoning, "") != strings.Join(wantR, "") || len(reasoning) != len(wantR) {
		t.Errorf("reasoning mismatch:\n got %q\nwant %q", reasoning, wantR)
	}
	if strings.Join(content, "") != strings.Join(wantC, "") || len(content) != len(wantC) {
		t.Errorf("content mismatch:\n got %q\nwant %q", content, wantC)
	}
	fin := events[len(events)-2].data
	if !strings.HasSuffix(fin, `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`) {
		t.Errorf("finish chunk %s", fin)
	}
	if events[len(events)-1].data != "[DONE]" {
		t.Errorf("last event %q, want [DONE]", events[len(events)-1].data)
	}
}

func TestStreamUsage(t *testing.T) {
	cfg := Config{ReasoningTokens: new(5), ContentTokens: new(7), ReasoningPattern: fast, ContentPattern: fast}
	_, ts := startServer(t, cfg)
	// 12 + 9 characters ("日本" counts as 2) = 21 -> ceil(21/4) = 6 prompt tokens.
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[
		{"role":"user","content":"hello world!"},
		{"role":"user","content":[{"type":"text","text":"日本 abcdef"}]}]}`
	events, err := readEvents(mustPost(t, ts, body).Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1+5+7+3 {
		t.Fatalf("got %d events", len(events))
	}
	for _, ev := range events[:len(events)-2] {
		if !strings.HasSuffix(ev.data, `,"usage":null}`) {
			t.Errorf("chunk without usage:null: %s", ev.data)
		}
	}
	last := events[len(events)-2].data
	if !strings.HasSuffix(last, `"choices":[],"usage":{"prompt_tokens":6,"completion_tokens":12,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":5}}}`) {
		t.Errorf("usage chunk %s", last)
	}
	if events[len(events)-1].data != "[DONE]" {
		t.Errorf("no [DONE]")
	}

	// include_usage false: no usage field at all.
	body = `{"model":"m","stream":true,"stream_options":{"include_usage":false},"messages":[]}`
	events, err = readEvents(mustPost(t, ts, body).Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if strings.Contains(ev.data, "usage") {
			t.Errorf("unexpected usage: %s", ev.data)
		}
	}
}

func TestStreamWithoutReasoning(t *testing.T) {
	cfg := Config{ReasoningTokens: new(0), ContentTokens: new(3), ContentPattern: fast}
	_, ts := startServer(t, cfg)
	events, err := readEvents(mustPost(t, ts, streamBody).Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1+3+2 {
		t.Fatalf("got %d events", len(events))
	}
	for _, ev := range events {
		if strings.Contains(ev.data, "reasoning_content") {
			t.Errorf("reasoning delta with reasoning_tokens 0: %s", ev.data)
		}
	}
}

func TestNonStream(t *testing.T) {
	cfg := Config{Seed: 3, ReasoningTokens: new(4), ContentTokens: new(6)}
	_, ts := startServer(t, cfg)
	resp := mustPost(t, ts, `{"model":"gpt-x","messages":[{"role":"user","content":"abcd"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var got struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Role             string  `json:"role"`
				Content          string  `json:"content"`
				ReasoningContent *string `json:"reasoning_content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	wantR, wantC := Texts(cfg)
	m := got.Choices[0].Message
	if got.ID != "chatcmpl-sim-1" || got.Object != "chat.completion" || got.Model != "gpt-x" ||
		m.Role != "assistant" || got.Choices[0].FinishReason != "stop" {
		t.Errorf("unexpected envelope %+v", got)
	}
	if m.Content != strings.Join(wantC, "") || m.ReasoningContent == nil || *m.ReasoningContent != strings.Join(wantR, "") {
		t.Errorf("texts mismatch: %+v", m)
	}
	if want := newUsage(1, 4, 6); got.Usage != want {
		t.Errorf("usage %+v, want %+v", got.Usage, want)
	}

	// No reasoning phase: the field is omitted.
	_, ts = startServer(t, Config{ReasoningTokens: new(0)})
	resp = mustPost(t, ts, `{"model":"m","messages":[]}`)
	var raw map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	msg := raw["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if _, ok := msg["reasoning_content"]; ok {
		t.Errorf("reasoning_content present with no reasoning phase: %v", msg)
	}
}

func TestRoutes(t *testing.T) {
	_, ts := startServer(t, Config{Models: []string{"a", "b"}})

	resp, err := ts.Client().Get(ts.URL + "/any/prefix/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object, OwnedBy string
			Created             int64
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != 2 || list.Data[0].ID != "a" || list.Data[1].ID != "b" || list.Data[0].Object != "model" {
		t.Errorf("models %+v", list)
	}

	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/v1/chat/completions", `{"model":`, 400, "invalid_json"},
		{"GET", "/v1/chat/completions", "", 405, "method_not_allowed"},
		{"GET", "/v1/embeddings", "", 404, "unknown_url"},
	} {
		req, _ := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader(tc.body))
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e apiError
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.status || e.Error.Code != tc.code || e.Error.Message == "" {
			t.Errorf("%s %s: status %d, error %+v (%v); want %d %s", tc.method, tc.path, resp.StatusCode, e, err, tc.status, tc.code)
		}
	}
}
