package llmrelay_test

// The recorded-stream corpus, replayed through the relay: every recording
// under testdata/recordings (real provider answers that public SDK
// repositories publish; testdata/recordings/README.md names each one's
// origin) is served by a fake upstream on 127.0.0.1, with no delays, to a
// relay whose upstream speaks the recording's dialect, and asked for by a
// client in every dialect, streaming and not:
//
//   - native (the client speaks the upstream's dialect), X-Relay-Mode: off:
//     the client gets the recording's bytes, exactly;
//   - native, paced (the relay's `smoothing pace` with its defaults): the
//     same answer, reassembled, signatures and usage and all;
//   - translated (streaming, paced or not, and whole): the text, the
//     reasoning, every tool call and the stop reason the recording says,
//     mapped by the tables of docs/anthropic.md and docs/responses.md, or
//     a clear refusal (an error naming why) where the recording holds
//     what the client's dialect cannot carry, as the table below decides.
//
// Subtests are named recording/client dialect/mode, so that a failure
// names the recording, the dialect and the path that lost something.
//
// A recording's .sse is replayed to stream requests and its .json to
// whole ones; a recording with only one of them is replayed only so.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// recording is one entry of the corpus.
type recording struct {
	path string // under testdata/recordings, without .sse/.json
	api  string // the `api` of the upstream that replays it
	// refused, when set, says why a translated answer cannot be faithful:
	// the relay must then answer an error, in-band or whole, that says so.
	refused string
}

// recordings is the corpus. Where a translated answer drops something
// (a thinking signature, redacted thinking, server tool blocks) the
// docs say so: docs/anthropic.md "How streams are translated".
var recordings = []recording{
	// Anthropic Messages, replayed by an `api anthropic` upstream.
	{path: "anthropic/text", api: "anthropic"},
	{path: "anthropic/thinking", api: "anthropic"},
	{path: "anthropic/redacted-thinking", api: "anthropic"},
	{path: "anthropic/tool-use", api: "anthropic"},
	{path: "anthropic/tool-no-args", api: "anthropic"},
	{path: "anthropic/thinking-tool-no-args", api: "anthropic"},
	{path: "anthropic/parallel-tool-use", api: "anthropic"},
	{path: "anthropic/refusal", api: "anthropic"},
	// Server tools: Anthropic ran the searches; the translated answer
	// carries the text (citations and the search blocks have no place in
	// Chat or Responses, and are not calls for the client to run).
	{path: "anthropic/web-search", api: "anthropic"},
	{path: "anthropic/pause-turn", api: "anthropic"},

	// OpenAI Responses, replayed by an `api openai` upstream. Only a
	// Responses client reaches the Responses endpoint (native).
	{path: "openai/responses-encrypted-reasoning-tool-call", api: "openai"},
	{path: "openai/responses-reasoning-summary-tool-call", api: "openai"},
	{path: "openai/responses-web-search", api: "openai"},
	{path: "openai/responses-parallel-function-calls", api: "openai"},

	// Chat Completions, replayed by an `api chat` upstream (so that a
	// Responses client's request is translated too).
	{path: "openai/chat-text", api: "chat"},
	{path: "openai/chat-refusal", api: "chat"},
	{path: "openai/chat-parallel-tool-calls", api: "chat"},
	{path: "openai/chat-length", api: "chat"},
	{path: "openai/chat-three-choices", api: "chat",
		refused: "three choices came for a request that asked for one: Messages and Responses carry one answer"},
	{path: "deepseek/reasoning", api: "chat"},
	{path: "deepseek/tool-call", api: "chat"},
	{path: "groq/tool-call", api: "chat"},
	{path: "groq/reasoning", api: "chat"},
	{path: "groq/reasoning-tool-call", api: "chat"},
	{path: "xai/text", api: "chat"},
	{path: "xai/tool-call", api: "chat"},
	{path: "mistral/reasoning-parts", api: "chat"},
	{path: "mistral/thinking-parts", api: "chat"},
	{path: "mistral/tool-call", api: "chat"},
	{path: "alibaba/reasoning", api: "chat"},
	{path: "alibaba/tool-call", api: "chat"},
	{path: "azure/model-router", api: "chat"},
}

const recordingsDir = "testdata/recordings"

// pacedNative counts the native streams replayed paced, pacedChanged
// those whose bytes the pacer changed (split, merged, renumbered).
var pacedNative, pacedChanged atomic.Int64

// The three dialects, by the names the subtests use.
const (
	dChat      = "chat"
	dMessages  = "messages"
	dResponses = "responses"
)

// dialectOfRecording is the dialect an upstream of that api answers in,
// for the requests the corpus sends it.
func dialectOfRecording(api string) string {
	switch api {
	case "anthropic":
		return dMessages
	case "openai":
		return dResponses // api openai recordings are Responses streams
	}
	return dChat
}

// recordingAlias is the relay's model alias for a recording.
func recordingAlias(path string) string { return "rec-" + strings.ReplaceAll(path, "/", "-") }

// recordingsRelay is the relay config: one upstream per api, all the fake
// replayer, one model alias per recording (its upstream model is the
// recording's path, which the replayer reads back), and the relay's pacer
// on with its defaults (X-Relay-Mode: off turns it off per request).
func recordingsRelay(f *fakeUpstream) string {
	var b strings.Builder
	b.WriteString("llm_relay {\n\tkey sk-rec\n")
	for _, api := range []string{"anthropic", "chat", "openai"} {
		fmt.Fprintf(&b, "\tupstream rec-%s %s/%s/v1 {\n\t\tapi %s\n\t}\n", api, f.URL, api, api)
	}
	b.WriteString("\tsmoothing pace\n")
	for _, r := range recordings {
		fmt.Fprintf(&b, "\tmodel %s {\n\t\tto rec-%s %s\n\t}\n", recordingAlias(r.path), r.api, r.path)
	}
	b.WriteString("}")
	return b.String()
}

// replayRecording answers a request with the recording its model names:
// the .sse to a stream request, the .json to a whole one, all at once.
func replayRecording(w http.ResponseWriter, model string, stream bool) {
	ext, ctype := ".json", "application/json"
	if stream {
		ext, ctype = ".sse", "text/event-stream; charset=utf-8"
	}
	b, err := os.ReadFile(filepath.Join(recordingsDir, filepath.FromSlash(model)+ext))
	if err != nil {
		// The relay asked for something the corpus does not hold (a
		// whole answer where only a stream was recorded): say so loudly.
		answerJSON(w, http.StatusNotFound, fmt.Sprintf(`{"error":{"message":%q,"type":"invalid_request_error","code":"no_recording"}}`, "no recording "+model+ext))
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// askRelay sends the client's request in dialect d for model, and returns
// the answer's status, content type and body.
func askRelay(t *testing.T, d, model string, stream, paced bool) (int, string, []byte) {
	t.Helper()
	var path, body string
	header := []string{"Authorization", "Bearer sk-rec"}
	switch d {
	case dChat:
		path = "/v1/chat/completions"
		body = fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Replay the recording."}],"stream":%t}`, model, stream)
		if stream {
			// As the recorded requests did: the recordings end with the
			// usage chunk, which the relay passes only to a client that
			// asked for it.
			body = body[:len(body)-1] + `,"stream_options":{"include_usage":true}}`
		}
	case dMessages:
		path = "/v1/messages"
		body = fmt.Sprintf(`{"model":%q,"max_tokens":4096,"messages":[{"role":"user","content":"Replay the recording."}],"stream":%t}`, model, stream)
		header = append(header, "anthropic-version", "2023-06-01")
	case dResponses:
		path = "/v1/responses"
		body = fmt.Sprintf(`{"model":%q,"input":"Replay the recording.","stream":%t}`, model, stream)
	}
	if !paced {
		header = append(header, "X-Relay-Mode", "off")
	}
	resp := postPath(t, path, body, header...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// readTurn reassembles an answer of dialect d; a Responses stream is read
// from its deltas (final is its final response object, else the same).
func readTurn(d string, stream bool, body []byte) (deltas, final turn) {
	switch {
	case d == dResponses && stream:
		r := responsesStreamRead(body)
		return r.deltas, r.final
	case d == dResponses:
		t := responsesJSONTurn(body)
		return t, t
	case d == dMessages && stream:
		t := messagesStreamTurn(body)
		return t, t
	case d == dMessages:
		t := messagesJSONTurn(body)
		return t, t
	case stream:
		t := chatStreamTurn(body)
		return t, t
	}
	t := chatJSONTurn(body)
	return t, t
}

func TestRecordedStreams(t *testing.T) {
	var replayer *fakeUpstream
	replayer = newFakeUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		// The fake upstream has read the relay's request into seen.
		body := replayer.requests()[n-1].body
		model, _ := body["model"].(string)
		stream, _ := body["stream"].(bool)
		replayRecording(w, model, stream)
	})
	startRelay(t, recordingsRelay(replayer))
	// After every subtest: the paced replays must have been paced, or
	// their subtests proved nothing the off ones did not.
	pacedNative.Store(0)
	pacedChanged.Store(0)
	t.Cleanup(func() {
		t.Logf("the pacer changed the bytes of %d of %d paced native streams", pacedChanged.Load(), pacedNative.Load())
		if n := pacedNative.Load(); n >= 10 && pacedChanged.Load() == 0 {
			t.Errorf("none of %d paced native streams differs from its recording by a byte: is the pacer on?", n)
		}
	})
	t.Run("corpus", checkCorpusListed)
	for _, rec := range recordings {
		t.Run(rec.path, func(t *testing.T) {
			t.Parallel()
			replayOne(t, rec)
		})
	}
}

// checkCorpusListed fails when a file under testdata/recordings is in no
// entry of the table (it would never be replayed), or an entry has no
// file.
func checkCorpusListed(t *testing.T) {
	listed := map[string]bool{}
	for _, r := range recordings {
		listed[r.path] = true
		_, errS := os.Stat(filepath.Join(recordingsDir, r.path+".sse"))
		_, errJ := os.Stat(filepath.Join(recordingsDir, r.path+".json"))
		if errS != nil && errJ != nil {
			t.Errorf("%s: neither %s.sse nor %s.json exists", r.path, r.path, r.path)
		}
	}
	err := filepath.WalkDir(recordingsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(recordingsDir, p)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "usage/") || strings.HasPrefix(rel, "licenses/") || rel == "README.md" {
			return nil // the usage recordings are replayed by their own test
		}
		base := strings.TrimSuffix(strings.TrimSuffix(rel, ".sse"), ".json")
		if !listed[base] {
			t.Errorf("%s is in no entry of the recordings table", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// replayOne runs one recording through every client dialect.
func replayOne(t *testing.T, rec recording) {
	src := dialectOfRecording(rec.api)
	files := map[bool][]byte{} // stream? → the recording
	for _, stream := range []bool{true, false} {
		ext := ".json"
		if stream {
			ext = ".sse"
		}
		b, err := os.ReadFile(filepath.Join(recordingsDir, rec.path+ext))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		// The recording must read as a complete answer of its dialect:
		// this checks the reassemblers as much as the file.
		if want, final := readTurn(src, stream, b); !want.Done || want.Err != "" || final.Err != "" {
			t.Fatalf("%s%s does not read as a complete %s answer: done=%v err=%q", rec.path, ext, src, want.Done, want.Err+final.Err)
		}
		files[stream] = b
	}
	clients := []string{dChat, dMessages, dResponses}
	if src == dResponses {
		clients = []string{dResponses}
	}
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			if b, ok := files[true]; ok {
				t.Run("stream-off", func(t *testing.T) { replayCase(t, rec, src, client, b, true, false) })
				t.Run("stream-paced", func(t *testing.T) { replayCase(t, rec, src, client, b, true, true) })
			}
			if b, ok := files[false]; ok {
				t.Run("json", func(t *testing.T) { replayCase(t, rec, src, client, b, false, false) })
			}
		})
	}
}

// replayCase asks the relay for one recording in one client dialect and
// checks the answer.
func replayCase(t *testing.T, rec recording, src, client string, recorded []byte, stream, paced bool) {
	status, ctype, got := askRelay(t, client, recordingAlias(rec.path), stream, paced)
	native := client == src
	switch {
	case native && !paced:
		if status != http.StatusOK {
			t.Fatalf("status %d, want 200: %s", status, clip(string(got)))
		}
		if !bytes.Equal(got, recorded) {
			t.Fatalf("native passthrough is not byte-exact: %s", firstDifference(got, recorded))
		}
	case native:
		if status != http.StatusOK {
			t.Fatalf("status %d, want 200: %s", status, clip(string(got)))
		}
		if stream {
			pacedNative.Add(1)
			if !bytes.Equal(got, recorded) {
				pacedChanged.Add(1)
			}
		}
		wantD, wantF := readTurn(src, stream, recorded)
		gotD, gotF := readTurn(client, stream, got)
		if d := differ(gotD, wantD); d != "" {
			t.Errorf("paced answer differs from the recording: %s", d)
		}
		if d := differ(gotF, wantF); d != "" && src == dResponses {
			t.Errorf("paced final response differs from the recording's: %s", d)
		}
	case rec.refused != "":
		checkRefused(t, client, stream, status, got, rec.refused)
	default:
		if status != http.StatusOK {
			t.Fatalf("status %d, want a translated answer: %s", status, clip(string(got)))
		}
		if want := "application/json"; stream {
			if !strings.HasPrefix(ctype, "text/event-stream") {
				t.Errorf("content type %q for a stream", ctype)
			}
		} else if !strings.HasPrefix(ctype, want) {
			t.Errorf("content type %q, want %s", ctype, want)
		}
		want, _ := readTurn(src, stream, recorded)
		gotD, gotF := readTurn(client, stream, got)
		problems := crossProblems(client, src, gotD, want)
		if client == dResponses && stream {
			for _, p := range crossProblems(client, src, gotF, want) {
				problems = append(problems, "final response: "+p)
			}
		}
		if len(problems) > 0 {
			t.Errorf("translated answer is not faithful to the recording:\n\t%s", strings.Join(problems, "\n\t"))
		}
	}
}

// checkRefused: the relay must answer an error that names why, an HTTP
// error or an in-band one, never a clean answer.
func checkRefused(t *testing.T, client string, stream bool, status int, body []byte, why string) {
	t.Helper()
	var msg string
	if status >= 400 {
		msg = errorMessage(body)
	} else {
		d, f := readTurn(client, stream, body)
		msg = d.Err
		if msg == "" {
			msg = f.Err
		}
		if msg == "" {
			t.Fatalf("a clean answer (status %d, done=%v) where the relay must refuse (%s):\n%s", status, d.Done, why, clip(string(body)))
		}
	}
	if msg == "" || strings.HasPrefix(msg, "(an error with no message)") {
		t.Errorf("the refusal does not say why (%s): %s", why, clip(string(body)))
	}
}

// stopClass is how a recorded answer ended, in words common to the
// dialects.
func stopClass(src string, t turn) string {
	switch src {
	case dMessages:
		switch t.Stop {
		case "end_turn", "stop_sequence":
			return "end"
		case "max_tokens", "model_context_window_exceeded":
			return "length"
		case "tool_use":
			return "tool"
		case "refusal":
			return "refusal"
		case "pause_turn":
			return "pause"
		}
	case dChat:
		switch t.Stop {
		case "stop":
			if t.Refusal != "" {
				return "refusal-text" // OpenAI's refusal: a refusal with finish_reason stop
			}
			return "end"
		case "length":
			return "length"
		case "tool_calls", "function_call":
			return "tool"
		case "content_filter":
			return "filter"
		}
	}
	return "unknown stop " + t.Stop
}

// stopIn is a stop class in the client's dialect: the tables of
// docs/anthropic.md (stop_reason ⇄ finish_reason) and docs/responses.md
// (finish_reason length or content_filter: status incomplete), with the
// refusal carried as refusal where the dialect has one (issue 25) and
// pause_turn an unfinished state (length; incomplete). "incomplete:*"
// accepts any reason.
func stopIn(client, class string) string {
	table := map[string]map[string]string{
		dChat: {"end": "stop", "refusal-text": "stop", "length": "length", "tool": "tool_calls",
			"refusal": "content_filter", "filter": "content_filter", "pause": "length"},
		dMessages: {"end": "end_turn", "refusal-text": "refusal", "length": "max_tokens", "tool": "tool_use",
			"refusal": "refusal", "filter": "refusal", "pause": "pause_turn"},
		dResponses: {"end": "completed", "refusal-text": "completed", "tool": "completed",
			"length": "incomplete:max_output_tokens", "refusal": "incomplete:content_filter",
			"filter": "incomplete:content_filter", "pause": "incomplete:*"},
	}
	if s, ok := table[client][class]; ok {
		return s
	}
	return class
}

func stopMatches(got, want string) bool {
	if prefix, ok := strings.CutSuffix(want, "*"); ok {
		return strings.HasPrefix(got, prefix)
	}
	return got == want
}

// messagesToolID is a tool call id as Messages accepts it: docs/anthropic.md
// says the relay makes ids valid for Messages, and Anthropic allows
// [A-Za-z0-9_-] only.
func messagesToolID(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// crossProblems lists where a translated answer differs from the
// recording it was translated from.
func crossProblems(client, src string, got, want turn) []string {
	var p []string
	if got.Err != "" {
		p = append(p, "in-band error: "+got.Err)
	}
	if !got.Done {
		p = append(p, "the answer did not end as a complete one")
	}
	// docs/anthropic.md: a translated answer keeps the upstream's model.
	if got.Model != want.Model {
		p = append(p, fmt.Sprintf("model %q, want the recording's %q", got.Model, want.Model))
	}
	// A refusal is text to a client whose dialect has no refusal member.
	if g, w := got.Text+got.Refusal, want.Text+want.Refusal; g != w {
		p = append(p, fmt.Sprintf("text %s, want %s", clip(g), clip(w)))
	}
	if got.Reasoning != want.Reasoning {
		p = append(p, fmt.Sprintf("reasoning %s, want %s", clip(got.Reasoning), clip(want.Reasoning)))
	}
	if len(got.Calls) != len(want.Calls) {
		p = append(p, fmt.Sprintf("%d tool calls %s, want %d %s", len(got.Calls), callsString(got.Calls), len(want.Calls), callsString(want.Calls)))
	} else {
		for i, g := range got.Calls {
			w := want.Calls[i]
			wantID := w.ID
			if client == dMessages {
				wantID = messagesToolID(wantID)
			}
			switch {
			case wantID == "" && g.ID == "":
				p = append(p, fmt.Sprintf("tool call %d has no id", i))
			case wantID != "" && g.ID != wantID:
				p = append(p, fmt.Sprintf("tool call %d id %q, want %q", i, g.ID, wantID))
			}
			if g.Name != w.Name {
				p = append(p, fmt.Sprintf("tool call %d name %q, want %q", i, g.Name, w.Name))
			}
			if !jsonEqual(g.Args, w.Args) {
				p = append(p, fmt.Sprintf("tool call %d (%s) arguments %q, want %q", i, w.Name, g.Args, w.Args))
			}
		}
	}
	class := stopClass(src, want)
	if wantStop := stopIn(client, class); !stopMatches(got.Stop, wantStop) {
		p = append(p, fmt.Sprintf("stop %q, want %q (the recording's %q)", got.Stop, wantStop, want.Stop))
	}
	if client == dChat && got.Choices != 1 {
		p = append(p, fmt.Sprintf("%d choices, want 1", got.Choices))
	}
	return p
}

func callsString(calls []toolCall) string {
	var parts []string
	for _, c := range calls {
		parts = append(parts, fmt.Sprintf("%s(%s)#%s", c.Name, clip(c.Args), c.ID))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// differ compares two reassembled answers whole (Detail included) and
// says where they first differ; "" when they are the same.
func differ(got, want turn) string {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if bytes.Equal(g, w) {
		return ""
	}
	return firstDifference(g, w)
}

// firstDifference shows where got first differs from want.
func firstDifference(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-80)
	return fmt.Sprintf("%d bytes, want %d; first difference at byte %d:\n\tgot  …%s…\n\twant …%s…",
		len(got), len(want), i, excerpt(got, from, i+120), excerpt(want, from, i+120))
}

func excerpt(b []byte, from, to int) string {
	to = min(to, len(b))
	if from > to {
		return ""
	}
	return fmt.Sprintf("%q", b[from:to])
}

// clip quotes s, cut to a readable length.
func clip(s string) string {
	if len(s) > 160 {
		return fmt.Sprintf("%q… (%d bytes)", s[:160], len(s))
	}
	return fmt.Sprintf("%q", s)
}
