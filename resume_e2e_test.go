package llmrelay_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
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

// rsStreamUpstream streams n Chat chunks with a gap, then [DONE], and
// reports on gone when the relay cancelled its request.
func rsStreamUpstream(t *testing.T, n int, gap time.Duration, gone chan<- int) *fakeUpstream {
	return newFakeUpstream(t, func(k int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i := 0; i < n; i++ {
			_, _ = io.WriteString(w, "data: "+chunk("w"+strconv.Itoa(i)+" ")+"\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				if gone != nil {
					gone <- k
				}
				return
			case <-time.After(gap):
			}
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
}

// rsReadEvents reads n data events of a stream and closes it: a client
// that goes away mid-stream. It returns the blocks read.
func rsReadEvents(t testing.TB, resp *http.Response, n int) []rsBlock {
	t.Helper()
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var got []rsBlock
	var cur strings.Builder
	for len(got) < n {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading: %v (after %d events)", err, len(got))
		}
		cur.WriteString(line)
		if line == "\n" {
			got = append(got, rsBlocks(cur.String())...)
			cur.Reset()
		}
	}
	return got
}

func rsRelay(upstream, resume string) string {
	return `llm_relay {
		key sk-resume-a a
		key sk-resume-b b
		upstream up ` + upstream + ` {
			api chat
		}
		model m {
			to up
		}
		resume {
			` + resume + `
		}
	}`
}

// TestResumeRetryReattaches: a client's retry of a request whose stream
// it lost re-attaches to that stream and is replayed from the start: the
// upstream generates once. Two identical requests at once, or a request
// after a stream whose client stayed to its end, generate twice.
func TestResumeRetryReattaches(t *testing.T) {
	up := rsStreamUpstream(t, 20, 20*time.Millisecond, nil)
	startRelay(t, rsRelay(up.v1(), "detach 10s"))
	const body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"retry me"}]}`
	auth := []string{"Authorization", "Bearer sk-resume-a"}

	first := rsReadEvents(t, post(t, body, auth...), 3)
	time.Sleep(100 * time.Millisecond) // the relay sees the client go
	again := post(t, body, auth...)
	if again.Header.Get("X-Relay-Resumed-After") != "0" {
		t.Fatalf("the retry was not re-attached: %v", again.Header)
	}
	replayed := rsBlocks(readAll(t, again))
	if len(replayed) != 21 || replayed[0].raw != first[0].raw || replayed[2].raw != first[2].raw {
		t.Fatalf("the re-attached retry got %d events; first %q vs %q", len(replayed), replayed[0].raw, first[0].raw)
	}
	if n := len(up.requests()); n != 1 {
		t.Fatalf("the upstream generated %d times, want 1", n)
	}
	// Its client stayed to the end: the same request again is a new one.
	readAll(t, post(t, body, auth...))
	if n := len(up.requests()); n != 2 {
		t.Fatalf("after a completed stream the upstream generated %d times, want 2", n)
	}
	// Another key's identical request is its own, whatever it sends.
	other := rsReadEvents(t, post(t, body, "Authorization", "Bearer sk-resume-b"), 2)
	_ = other
	time.Sleep(100 * time.Millisecond)
	readAll(t, post(t, body, auth...))
	if n := len(up.requests()); n != 4 {
		t.Fatalf("key a re-attached to key b's stream (or b's retry was lost): %d generations, want 4", n)
	}
	// Two at once are two samples.
	done := make(chan string, 2)
	for range 2 {
		go func() {
			resp, err := http.DefaultClient.Do(rsPost(body, auth...))
			if err != nil {
				done <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			done <- string(b)
		}()
	}
	<-done
	<-done
	if n := len(up.requests()); n != 6 {
		t.Fatalf("two identical requests at once made %d generations, want 2", n-4)
	}
}

func rsPost(body string, header ...string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, relayBase+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

// TestResumeIdempotencyKey: a request with an Idempotency-Key joins the
// stream started with it, even while its first client is connected; the
// same key with another body is refused.
func TestResumeIdempotencyKey(t *testing.T) {
	up := rsStreamUpstream(t, 10, 20*time.Millisecond, nil)
	startRelay(t, rsRelay(up.v1(), ""))
	const body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"idem"}]}`
	h := []string{"Authorization", "Bearer sk-resume-a", "Idempotency-Key", "k-1"}
	first := post(t, body, h...)
	second := post(t, body, h...)
	a, b := readAll(t, first), readAll(t, second)
	if a != b || len(rsBlocks(a)) != 11 {
		t.Fatalf("the joined stream differs from the first:\n%s\n---\n%s", a, b)
	}
	if n := len(up.requests()); n != 1 {
		t.Fatalf("%d generations, want 1", n)
	}
	conflict := post(t, strings.Replace(body, "idem", "other", 1), h...)
	if conflict.StatusCode != http.StatusConflict || !strings.Contains(readAll(t, conflict), "idempotency_key_reused") {
		t.Fatalf("a reused Idempotency-Key with another body: %d", conflict.StatusCode)
	}
}

// TestResumeDetach: with detach off the upstream is cancelled when the
// client goes, and a resume reads a stream that ends with an in-band
// error; with a short detach, a generation no one comes back to is
// cancelled after it.
func TestResumeDetach(t *testing.T) {
	gone := make(chan int, 4)
	up := rsStreamUpstream(t, 200, 20*time.Millisecond, gone)
	for _, tc := range []struct {
		resume string
		within time.Duration
	}{{"detach off", 0}, {"detach 300ms", 300 * time.Millisecond}} {
		t.Run(tc.resume, func(t *testing.T) {
			startRelay(t, rsRelay(up.v1(), tc.resume))
			body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + tc.resume + `"}]}`
			resp := post(t, body, "Authorization", "Bearer sk-resume-a")
			url := resp.Header.Get("X-Relay-Stream")
			got := rsReadEvents(t, resp, 2)
			left := time.Now()
			select {
			case <-gone:
			case <-time.After(4 * time.Second):
				t.Fatal("the upstream was not cancelled")
			}
			if waited := time.Since(left); waited < tc.within {
				t.Fatalf("cancelled after %v, before detach %v", waited, tc.within)
			}
			tail := readAll(t, rsGet(t, url, "Authorization", "Bearer sk-resume-a", "Last-Event-ID", got[1].id))
			if !strings.Contains(tail, `"stream_cancelled"`) || strings.Contains(tail, "[DONE]") {
				t.Fatalf("the resumed stream does not say it was cancelled:\n%s", tail)
			}
		})
	}
}

// TestResumeResponses: a Responses stream resumed by starting_after, the
// response read by id while it runs and after, a background response
// polled to completion, and one cancelled; all through a Chat upstream,
// whose ids and sequence numbers the relay mints.
func TestResumeResponses(t *testing.T) {
	logFile := startRelay(t, resumeRelay, resumeSite)
	defer func() {
		if t.Failed() {
			t.Log(readLog(t, logFile))
		}
	}()
	auth := []string{"Authorization", "Bearer sk-resume-a"}
	const body = `{"model":"m","stream":true,"input":"hello"}`
	whole := rsBlocks(readAll(t, postPath(t, "/v1/responses", body, auth...)))

	got := rsReadEvents(t, postPath(t, "/v1/responses", body, auth...), 5)
	var created struct {
		Response struct{ ID string } `json:"response"`
	}
	if err := json.Unmarshal([]byte(got[0].data), &created); err != nil || created.Response.ID == "" {
		t.Fatalf("no response id in %s", got[0].data)
	}
	var last struct {
		Seq int `json:"sequence_number"`
	}
	_ = json.Unmarshal([]byte(got[4].data), &last)
	tail := readAll(t, rsGet(t, "/v1/responses/"+created.Response.ID+"?stream=true&starting_after="+strconv.Itoa(last.Seq), auth...))
	got = append(got, rsBlocks(tail)...)
	if len(got) != len(whole) {
		t.Fatalf("resumed %d events, the uninterrupted stream has %d:\n%s", len(got), len(whole), tail)
	}
	for i, b := range got {
		var ev struct {
			Type string `json:"type"`
			Seq  int    `json:"sequence_number"`
		}
		_ = json.Unmarshal([]byte(b.data), &ev)
		if ev.Seq != i || !strings.Contains(whole[i].data, `"type":"`+ev.Type+`"`) {
			t.Fatalf("event %d: %s (want the type of %s)", i, b.data, whole[i].data)
		}
	}
	obj := readAll(t, rsGet(t, "/v1/responses/"+created.Response.ID, auth...))
	if !strings.Contains(obj, `"status":"completed"`) || !strings.Contains(obj, `"output_text"`) {
		t.Fatalf("GET by id: %s", obj)
	}
	if resp := rsGet(t, "/v1/responses/"+created.Response.ID, "Authorization", "Bearer sk-resume-b"); resp.StatusCode == http.StatusOK {
		t.Fatalf("another key read the response: %s", readAll(t, resp))
	}

	// Background: answered at once, polled until done.
	httpClient.Timeout = 5 * time.Second
	defer func() { httpClient.Timeout = 30 * time.Second }()
	bg := readAll(t, postPath(t, "/v1/responses", `{"model":"m","background":true,"input":"in the background"}`, auth...))
	var o struct {
		ID         string `json:"id"`
		Status     string `json:"status"`
		Background bool   `json:"background"`
	}
	if err := json.Unmarshal([]byte(bg), &o); err != nil || o.ID == "" || o.Status == "completed" || !o.Background {
		t.Fatalf("background create: %s", bg)
	}
	waitFor(t, 10*time.Second, "the background response to complete", func() bool {
		return strings.Contains(readAll(t, rsGet(t, "/v1/responses/"+o.ID, auth...)), `"status":"completed"`)
	})
	streamed := readAll(t, rsGet(t, "/v1/responses/"+o.ID+"?stream=true", auth...))
	if !strings.Contains(streamed, "response.completed") {
		t.Fatalf("the background response streamed by id:\n%s", streamed)
	}

	// Cancelled.
	bg = readAll(t, postPath(t, "/v1/responses", `{"model":"m","background":true,"input":"cancel me"}`, auth...))
	_ = json.Unmarshal([]byte(bg), &o)
	cancelled := readAll(t, postPath(t, "/v1/responses/"+o.ID+"/cancel", ``, auth...))
	if !strings.Contains(cancelled, `"status":"cancelled"`) {
		t.Fatalf("cancel: %s", cancelled)
	}
}

// TestResumeMessagesLastEventID: a Messages client (Claude Code's
// dialect, here over a Chat upstream) reads a few events and goes away;
// it resumes at the stream URL with its Last-Event-ID and gets the rest
// in the Messages shape, each event once; another key gets a 404 in the
// Messages error shape.
func TestResumeMessagesLastEventID(t *testing.T) {
	startRelay(t, resumeRelay, resumeSite)
	const body = `{"model":"m","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"hi from messages"}]}`
	hdr := []string{"X-Api-Key", "sk-resume-a", "Anthropic-Version", "2023-06-01"}

	whole := readAll(t, postPath(t, "/v1/messages", body, hdr...))
	ref := rsBlocks(whole)
	if len(ref) < 10 || !strings.Contains(ref[len(ref)-1].data, `"message_stop"`) {
		t.Fatalf("the reference stream is short or unfinished:\n%s", whole)
	}

	resp := postPath(t, "/v1/messages", body, append(hdr, "Idempotency-Key", "")...)
	url := resp.Header.Get("X-Relay-Stream")
	if url == "" {
		t.Fatalf("no stream URL in the headers: %v", resp.Header)
	}
	got := rsReadEvents(t, resp, 3)
	last := got[len(got)-1].id

	other := rsGet(t, url, "X-Api-Key", "sk-resume-b", "Anthropic-Version", "2023-06-01", "Last-Event-ID", last)
	if msg := readAll(t, other); other.StatusCode != http.StatusNotFound || !strings.Contains(msg, `"type":"error"`) || !strings.Contains(msg, "not_found_error") {
		t.Fatalf("another key's resume: %d %s, want a 404 in the Messages shape", other.StatusCode, msg)
	}
	rest := rsGet(t, url, append(hdr, "Last-Event-ID", last)...)
	if rest.StatusCode != http.StatusOK || !strings.HasPrefix(rest.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("resume: %d %s", rest.StatusCode, rest.Header.Get("Content-Type"))
	}
	got = append(got, rsBlocks(readAll(t, rest))...)
	if len(got) != len(ref) {
		t.Fatalf("got %d events, the uninterrupted stream has %d", len(got), len(ref))
	}
	for i := range ref {
		if stripVolatile(got[i].data) != stripVolatile(ref[i].data) {
			t.Fatalf("event %d differs:\n got %s\nwant %s", i, got[i].data, ref[i].data)
		}
	}
}

// TestResumeDetachedCountsLimits: a detached generation is the same
// request without its client: the key's max_concurrent counts it until
// it ends, then frees.
func TestResumeDetachedCountsLimits(t *testing.T) {
	up := rsStreamUpstream(t, 40, 25*time.Millisecond, nil)
	startRelay(t, `llm_relay {
		key sk-resume-a a {
			max_concurrent 1
		}
		upstream up `+up.v1()+` {
			api chat
		}
		model m {
			to up
		}
		resume {
			detach 30s
		}
	}`)
	resp := post(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"first"}]}`, "Authorization", "Bearer sk-resume-a")
	url := resp.Header.Get("X-Relay-Stream")
	rsReadEvents(t, resp, 2) // the client goes away; the generation goes on
	second := `{"model":"m","stream":true,"messages":[{"role":"user","content":"second"}]}`
	if r := post(t, second, "Authorization", "Bearer sk-resume-a"); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a second request while the first runs detached: %d %s, want 429 (max_concurrent 1 counts it)", r.StatusCode, readAll(t, r))
	}
	// The whole journal, read to its end, is the detached generation's end.
	if tail := readAll(t, rsGet(t, url+"?after=0", "Authorization", "Bearer sk-resume-a")); !strings.HasSuffix(tail, "data: [DONE]\n\n") {
		t.Fatalf("the detached generation did not complete:\n%s", tail)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		r := post(t, second, "Authorization", "Bearer sk-resume-a")
		if r.StatusCode == http.StatusOK {
			readAll(t, r)
			break
		}
		readAll(t, r)
		if time.Now().After(deadline) {
			t.Fatalf("after the detached generation ended the key is still full: %d", r.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(up.requests()); n != 2 {
		t.Fatalf("the upstream saw %d requests, want 2 (the 429 never reached it)", n)
	}
}
