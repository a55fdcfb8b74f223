package llmrelay_test

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/gemini"
	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

// Resumable streams for Gemini clients (issues 31 and 32): a Gemini
// client's stream is journaled as the Chat stream the front door
// translates, and every way back in (a retry, the stream URL) is
// translated again, so the client gets Gemini's shape and no SSE ids,
// which Gemini's stream readers do not take.

const rgPath = "/v1beta/models/m:streamGenerateContent"

const rgBody = `{"contents":[{"role":"user","parts":[{"text":"resume me"}]}]}`

// rgEvents splits a Gemini SSE body into its data events' JSON.
func rgEvents(body string) []string {
	var out []string
	for _, b := range rsBlocks(strings.ReplaceAll(body, "\r\n", "\n")) {
		out = append(out, b.data)
	}
	return out
}

// rgRead reads n data events of a Gemini SSE stream and goes away.
func rgRead(t *testing.T, resp *http.Response, n int) []string {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var got []string
	for _, b := range rsReadEvents(t, resp, n) {
		got = append(got, b.data)
	}
	return got
}

// rgText is the text an event's parts carry.
func rgText(t *testing.T, ev string) string {
	t.Helper()
	var a geminiAnswer
	if err := json.Unmarshal([]byte(ev), &a); err != nil {
		t.Fatalf("not a Gemini chunk: %v: %s", err, ev)
	}
	_, text := a.texts()
	return text
}

// rgWhole checks a Gemini SSE body is a whole stream with no SSE ids and
// returns its events.
func rgWhole(t *testing.T, what, body string) []string {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "id:") || strings.HasPrefix(line, "retry:") {
			t.Fatalf("%s: a Gemini stream carries an SSE %q line, which @google/genai's reader drops the event for:\n%s", what, line, body)
		}
	}
	evs := rgEvents(body)
	if len(evs) < 5 || !strings.Contains(evs[len(evs)-1], `"finishReason"`) {
		t.Fatalf("%s: not a whole Gemini stream (%d events):\n%s", what, len(evs), body)
	}
	return evs
}

// TestResumeGeminiClient: with resume on, a Gemini client's stream
// carries no SSE ids but names its stream URL; a client that went away
// mid-stream and retries is re-attached (one generation) and replayed
// from the start in Gemini's shape; the stream URL replays it in
// Gemini's shape after a position counted in Gemini events, by header or
// ?key=, and refuses another key in Google's error shape.
func TestResumeGeminiClient(t *testing.T) {
	up := rsStreamUpstream(t, 20, 20*time.Millisecond, nil)
	startRelay(t, rsRelay(up.v1(), "detach 10s"))
	keyA := []string{"x-goog-api-key", "sk-resume-a"}

	// The reference: one whole stream.
	refResp := geminiPost(t, rgPath+"?alt=sse", rgBody, keyA...)
	if refResp.Header.Get("X-Relay-Stream") == "" {
		t.Fatalf("no stream URL on a Gemini stream: %v", refResp.Header)
	}
	ref := rgWhole(t, "reference", readAll(t, refResp))
	if n := len(up.requests()); n != 1 {
		t.Fatalf("%d generations for one stream", n)
	}

	// A client that reads 3 events and goes, then retries.
	first := geminiPost(t, rgPath+"?alt=sse", rgBody, keyA...)
	url, id := first.Header.Get("X-Relay-Stream"), first.Header.Get("X-Relay-Stream-Id")
	head := rgRead(t, first, 3)
	time.Sleep(100 * time.Millisecond) // the relay sees the client go
	again := geminiPost(t, rgPath+"?alt=sse", rgBody, keyA...)
	if again.Header.Get("X-Relay-Resumed-After") != "0" || again.Header.Get("X-Relay-Stream-Id") != id {
		t.Fatalf("the retry was not re-attached to %s: %v", id, again.Header)
	}
	replayed := rgWhole(t, "retry", readAll(t, again))
	if n := len(up.requests()); n != 2 {
		t.Fatalf("the upstream generated %d times, want 2 (the reference and the first client's)", n)
	}
	if len(replayed) != len(ref) {
		t.Fatalf("the retry got %d events, a whole stream has %d", len(replayed), len(ref))
	}
	for i := range head {
		if head[i] != replayed[i] {
			t.Fatalf("event %d replayed differs:\n got %s\nwant %s", i, replayed[i], head[i])
		}
	}
	for i := range ref {
		if rgText(t, ref[i]) != rgText(t, replayed[i]) {
			t.Fatalf("event %d: %q, an uninterrupted stream has %q", i, rgText(t, replayed[i]), rgText(t, ref[i]))
		}
	}

	// The stream URL, after the 3 events the client had: the rest, in
	// Gemini's shape, by x-goog-api-key, by ?key=, and by Bearer (the
	// stream is a Gemini client's, whatever the credential).
	for _, c := range []struct {
		name, path string
		hdr        []string
	}{
		{"x-goog-api-key", url, append([]string{"Last-Event-ID", id + ".3"}, keyA...)},
		{"?key=", url + "?key=sk-resume-a&after=3", nil},
		{"Bearer", url, []string{"Authorization", "Bearer sk-resume-a", "Last-Event-ID", id + ".3"}},
	} {
		resp := rsGet(t, c.path, c.hdr...)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Relay-Resumed-After") != "3" {
			t.Fatalf("%s: %d %v %s", c.name, resp.StatusCode, resp.Header, readAll(t, resp))
		}
		tail := rgWhole(t, c.name, readAll(t, resp))
		if got := append(append([]string{}, head...), tail...); len(got) != len(replayed) {
			t.Fatalf("%s: %d + %d events, the stream has %d", c.name, len(head), len(tail), len(replayed))
		}
		for i, ev := range tail {
			if ev != replayed[3+i] {
				t.Fatalf("%s: event %d:\n got %s\nwant %s", c.name, 3+i, ev, replayed[3+i])
			}
		}
	}

	// A retry carrying Last-Event-ID is replayed after it.
	resp := geminiPost(t, rgPath+"?alt=sse", rgBody, append([]string{"Last-Event-ID", id + ".5"}, keyA...)...)
	if tail := rgEvents(readAll(t, resp)); len(tail) != len(replayed)-5 || tail[0] != replayed[5] {
		t.Fatalf("a retry with Last-Event-ID %s.5: %d events, want %d from the 6th", id, len(tail), len(replayed)-5)
	}

	// Another key: no such stream, in Google's shape.
	readGeminiError(t, rsGet(t, url, "x-goog-api-key", "sk-resume-b"), http.StatusNotFound, "NOT_FOUND")
	if n := len(up.requests()); n != 2 {
		t.Fatalf("the resumes generated: %d generations, want 2", n)
	}
}

// TestResumeGeminiArrayRetry: a Gemini client reading the JSON-array
// stream (no alt=sse) that goes and retries is re-attached and gets the
// whole array, which parses.
func TestResumeGeminiArrayRetry(t *testing.T) {
	up := rsStreamUpstream(t, 20, 20*time.Millisecond, nil)
	startRelay(t, rsRelay(up.v1(), "detach 10s"))
	first := geminiPost(t, rgPath, rgBody, "x-goog-api-key", "sk-resume-a")
	buf := make([]byte, 200)
	if _, err := io.ReadAtLeast(first.Body, buf, 100); err != nil {
		t.Fatal(err)
	}
	first.Body.Close()
	time.Sleep(100 * time.Millisecond)
	again := geminiPost(t, rgPath, rgBody, "x-goog-api-key", "sk-resume-a")
	b := readAll(t, again)
	var arr []json.RawMessage
	if again.Header.Get("X-Relay-Resumed-After") != "0" || json.Unmarshal([]byte(b), &arr) != nil || len(arr) < 20 ||
		!strings.Contains(string(arr[len(arr)-1]), "finishReason") {
		t.Fatalf("the re-attached array (%v):\n%s", again.Header, b)
	}
	if n := len(up.requests()); n != 1 {
		t.Fatalf("the upstream generated %d times, want 1", n)
	}
}

// TestResumeGeminiNotAChatClients: a Chat client whose request is the
// very Chat request a Gemini client's stands for is not re-attached to
// the Gemini client's orphaned stream (nor the other way round): each
// gets a generation of its own, in its own shape.
func TestResumeGeminiNotAChatClients(t *testing.T) {
	up := rsStreamUpstream(t, 20, 20*time.Millisecond, nil)
	startRelay(t, rsRelay(up.v1(), "detach 10s"))
	chatOf := func(body string) string {
		b, err := gemini.ToChatStreamRequest([]byte(body), chat.Options{Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// The Gemini client goes first; then the Chat client.
	rgRead(t, geminiPost(t, rgPath+"?alt=sse", rgBody, "x-goog-api-key", "sk-resume-a"), 2)
	time.Sleep(100 * time.Millisecond)
	resp := post(t, chatOf(rgBody), "Authorization", "Bearer sk-resume-a")
	s := readAll(t, resp)
	if resp.Header.Get("X-Relay-Resumed-After") != "" || !strings.HasSuffix(s, "data: [DONE]\n\n") {
		t.Fatalf("the Chat client was re-attached to the Gemini client's stream (%v):\n%s", resp.Header, s)
	}
	// The Chat client goes first; then the Gemini client.
	const other = `{"contents":[{"role":"user","parts":[{"text":"the other way"}]}]}`
	rsReadEvents(t, post(t, chatOf(other), "Authorization", "Bearer sk-resume-a"), 2)
	time.Sleep(100 * time.Millisecond)
	g := geminiPost(t, rgPath+"?alt=sse", other, "x-goog-api-key", "sk-resume-a")
	if g.Header.Get("X-Relay-Resumed-After") != "" {
		t.Fatalf("the Gemini client was re-attached to the Chat client's stream: %v", g.Header)
	}
	rgWhole(t, "gemini", readAll(t, g))
	if n := len(up.requests()); n != 4 {
		t.Fatalf("%d generations, want 4", n)
	}
}

// TestResumeGeminiSDK: with resume on, @google/genai's stream and its
// function-call round trip read the relay's Gemini streams as without
// it (an SSE id line would make its reader drop or fail an event).
func TestResumeGeminiSDK(t *testing.T) {
	node := requireNode(t, filepath.Join("@google", "genai"), "the @google/genai SDK")
	startRelay(t, geminiRelay("resume {\n\t\t\tdetach 10s\n\t\t}"), geminiTargetsSite)
	reasoning, content := geminiSimTexts()
	var got struct {
		Text, Thoughts, Finish string
		Chunks                 int
	}
	runGeminiSDKRelay(t, node, "gemini-chat", "stream", &got)
	if got.Text != content || got.Thoughts != reasoning || got.Finish != "STOP" || got.Chunks < 3 {
		t.Errorf("stream: %+v, want text %q thoughts %q", got, content, reasoning)
	}
	var tools struct {
		Calls []struct {
			Name string
			Args json.RawMessage
		}
		Finish, Answer string
	}
	runGeminiSDKRelay(t, node, "gemini-chat", "tools", &tools)
	if len(tools.Calls) != 1 || string(tools.Calls[0].Args) != sim.ToolInput || tools.Answer != content {
		t.Errorf("tools: %+v", tools)
	}
}
