package llmrelay_test

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// resumeSite runs the resume tests' simulator on :9120: a Chat, Messages
// and Responses speaker whose answers take about a second (40 tokens at
// 40 per second), with one seed, so two generations are the same text.
const resumeSite = `http://127.0.0.1:9120 {
	llm_simulator {
		seed 31
		reasoning_tokens 0
		content_tokens 40
		pattern steady 40
	}
}`

const resumeRelay = `llm_relay {
		key sk-resume-a a
		key sk-resume-b b
		upstream sim http://127.0.0.1:9120/v1 {
			api chat
		}
		model m {
			to sim
		}
		resume {
			detach 30s
		}
	}`

// rsBlock is one SSE block of a relay stream: its id and data.
type rsBlock struct{ id, data, raw string }

// rsBlocks splits an SSE body into blocks with data (comments skipped).
func rsBlocks(body string) []rsBlock {
	var out []rsBlock
	for _, raw := range strings.SplitAfter(body, "\n\n") {
		var b rsBlock
		b.raw = raw
		for _, line := range strings.Split(raw, "\n") {
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				b.id = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				b.data += v
			}
		}
		if b.data != "" {
			out = append(out, b)
		}
	}
	return out
}

func rsGet(t *testing.T, path string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, relayBase+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp
}

// TestResumeChatAfterDisconnect: a Chat client reads a few events and
// goes away; the generation goes on; the client resumes at the stream URL
// with its Last-Event-ID and gets the rest: together, exactly the events
// of an uninterrupted stream, each once.
func TestResumeChatAfterDisconnect(t *testing.T) {
	startRelay(t, resumeRelay, resumeSite)
	const body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`

	whole := readAll(t, post(t, body, "Authorization", "Bearer sk-resume-a"))
	ref := rsBlocks(whole)
	if len(ref) < 10 || !strings.HasSuffix(whole, "data: [DONE]\n\n") {
		t.Fatalf("the reference stream is short or unfinished:\n%s", whole)
	}
	if !strings.HasPrefix(ref[0].raw, "id: rs_") || !strings.Contains(ref[0].raw, "\nretry: 1000\n") {
		t.Fatalf("the first event has no id or retry hint: %q", ref[0].raw)
	}

	resp := post(t, body, "Authorization", "Bearer sk-resume-a", "Idempotency-Key", "")
	url := resp.Header.Get("X-Relay-Stream")
	if url == "" || resp.Header.Get("X-Relay-Stream-Id") == "" {
		t.Fatalf("no stream URL in the headers: %v", resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	var got []rsBlock
	var cur strings.Builder
	for len(got) < 4 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		cur.WriteString(line)
		if line == "\n" {
			got = append(got, rsBlocks(cur.String())...)
			cur.Reset()
		}
	}
	resp.Body.Close() // the client goes away mid-stream
	last := got[len(got)-1].id

	// Another key finds nothing, in its dialect; so does an unknown id.
	other := rsGet(t, url, "Authorization", "Bearer sk-resume-b", "Last-Event-ID", last)
	if other.StatusCode != http.StatusNotFound || !strings.Contains(readAll(t, other), "stream_not_found") {
		t.Fatalf("another key's resume: %d", other.StatusCode)
	}
	time.Sleep(100 * time.Millisecond)
	rest := rsGet(t, url, "Authorization", "Bearer sk-resume-a", "Last-Event-ID", last)
	if rest.StatusCode != http.StatusOK {
		t.Fatalf("resume: %d %s", rest.StatusCode, readAll(t, rest))
	}
	tail := readAll(t, rest)
	got = append(got, rsBlocks(tail)...)
	if !strings.HasSuffix(tail, "data: [DONE]\n\n") {
		t.Fatalf("the resumed stream did not end with [DONE]:\n%s", tail)
	}
	if len(got) != len(ref) {
		t.Fatalf("got %d events, the uninterrupted stream has %d", len(got), len(ref))
	}
	for i := range ref {
		if stripVolatile(got[i].data) != stripVolatile(ref[i].data) {
			t.Fatalf("event %d differs:\n got %s\nwant %s", i, got[i].data, ref[i].data)
		}
	}
}

// stripVolatile drops the fields two generations of one answer differ in.
func stripVolatile(s string) string {
	for _, f := range []string{`"id":"`, `"created":`} {
		if i := strings.Index(s, f); i >= 0 {
			j := i + len(f)
			for j < len(s) && s[j] != ',' && s[j] != '}' {
				j++
			}
			s = s[:i] + s[j:]
		}
	}
	return s
}

var _ = io.EOF
