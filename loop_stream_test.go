package llmrelay

// The request loop's stream rules, driven in process
// (loop_harness_test.go): what a clean end of stream is for each client
// endpoint, translated or not; the unreadable-event rule; the reasoning
// budget's failover on a committed stream.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Anthropic Messages upstream events.

func msgStart(id string) string {
	return event("message_start", `{"type":"message_start","message":{"id":"`+id+`","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`)
}

func msgBlockStart(kind string) string {
	block := `{"type":"text","text":""}`
	if kind == "thinking" {
		block = `{"type":"thinking","thinking":"","signature":""}`
	}
	return event("content_block_start", `{"type":"content_block_start","index":0,"content_block":`+block+`}`)
}

func msgDelta(kind, text string) string {
	b, _ := json.Marshal(text)
	if kind == "thinking" {
		return event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":`+string(b)+`}}`)
	}
	return event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(b)+`}}`)
}

// messagesStream is a whole Messages stream answering text.
func messagesStream(text string) []string {
	return []string{
		msgStart("msg_1"),
		msgBlockStart("text"),
		event("ping", `{"type": "ping"}`),
		msgDelta("text", text),
		event("content_block_stop", `{"type":"content_block_stop","index":0}`),
		event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}`),
		event("message_stop", `{"type":"message_stop"}`),
	}
}

// Responses API upstream events.

func respEvent(seq int, typ, members string) string {
	return fmt.Sprintf("event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, members)
}

// responsesStream is a whole Responses stream answering text, ending with
// end (response.completed or response.incomplete).
func responsesStream(text, end string) []string {
	const resp = `"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}`
	item := `{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"` + text + `","annotations":[]}]}`
	status := "completed"
	if end == "response.incomplete" {
		status = "incomplete"
	}
	done := `"response":{"id":"resp_1","object":"response","created_at":1,"status":"` + status + `","model":"m","output":[` + item + `],"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":7}}`
	return []string{
		respEvent(0, "response.created", resp),
		respEvent(1, "response.in_progress", resp),
		respEvent(2, "response.output_item.added", `"output_index":0,"item":{"type":"message","id":"msg_1","status":"in_progress","role":"assistant","content":[]}`),
		respEvent(3, "response.content_part.added", `"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}`),
		respEvent(4, "response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"`+text+`","logprobs":[]`),
		respEvent(5, "response.output_text.done", `"item_id":"msg_1","output_index":0,"content_index":0,"text":"`+text+`","logprobs":[]`),
		respEvent(6, "response.content_part.done", `"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"`+text+`","annotations":[]}`),
		respEvent(7, "response.output_item.done", `"output_index":0,"item":`+item),
		respEvent(8, end, done),
	}
}

// completionChunk is a legacy completions stream chunk.
func completionChunk(text string) string {
	return `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"text":"` + text + `","index":0,"logprobs":null,"finish_reason":null}]}`
}

// soloConfig is a relay with one upstream u of the given api and a model
// m routed to it, plus extra top-level members.
func soloConfig(api, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{
		"upstreams": [{"name": "u", "api": "` + api + `"}],
		"models": [{"alias": "loop", "targets": [{"upstream": "u"}]}]` + extra + `
	}`
}

// The end-of-stream rule of each client endpoint: a stream that ends
// with its endpoint's end event is complete and passes as it came; one
// that ends (EOF) before it gets the relay's in-band error in the
// client's shape after what was sent. A stream the relay does not
// understand (an endpoint it passes through) ends cleanly at EOF.
func TestLoopEndOfStreamPerEndpoint(t *testing.T) {
	const (
		openaiTruncated    = "upstream_stream_truncated"
		messagesTruncated  = `{"type":"error","error":{"type":"api_error","message":"The upstream closed the stream before it was complete."}}`
		responsesTruncated = `"code":"upstream_stream_truncated"`
		clean              = ""
	)
	runs := []string{
		event("thread.run.created", `{"id":"run_1","object":"thread.run","status":"queued"}`),
		event("thread.message.delta", `{"id":"msg_1","object":"thread.message.delta","delta":{"content":[{"index":0,"type":"text","text":{"value":"Hello"}}]}}`),
		event("thread.run.completed", `{"id":"run_1","object":"thread.run","status":"completed"}`),
	}
	for _, c := range []struct {
		name   string
		path   string
		body   string
		api    string
		blocks []string
		// upPath is the endpoint the upstream was sent.
		upPath string
		// exact: the client gets the upstream's bytes unchanged (a
		// clean end of an untranslated stream).
		exact bool
		// end: "" for a clean end, else what the last event of the
		// client's stream carries (the relay's error).
		end string
		// text the client must get, and events it must not.
		text string
		none []string
	}{
		{"chat, [DONE]", "/v1/chat/completions", chatStreamReq, "openai", chatStream("Hello"), "/v1/chat/completions", true, clean, "Hello", nil},
		{"chat, EOF", "/v1/chat/completions", chatStreamReq, "openai", chatStream("Hello")[:2], "/v1/chat/completions", false, openaiTruncated, "Hello", []string{"[DONE]"}},
		{"legacy completions, [DONE]", "/v1/completions", completionsReq, "openai", []string{data(completionChunk("Hello")), data("[DONE]")}, "/v1/completions", true, clean, "Hello", nil},
		{"legacy completions, EOF", "/v1/completions", completionsReq, "openai", []string{data(completionChunk("Hello"))}, "/v1/completions", false, openaiTruncated, "Hello", []string{"[DONE]"}},
		{"messages, message_stop", "/v1/messages", messagesReq, "anthropic", messagesStream("Hello"), "/v1/messages", true, clean, "Hello", nil},
		{"messages, EOF", "/v1/messages", messagesReq, "anthropic", messagesStream("Hello")[:5], "/v1/messages", false, messagesTruncated, "Hello", []string{"message_stop"}},
		{"responses, response.completed", "/v1/responses", responsesReq, "openai", responsesStream("Hello", "response.completed"), "/v1/responses", true, clean, "Hello", nil},
		{"responses, response.incomplete", "/v1/responses", responsesReq, "openai", responsesStream("Hello", "response.incomplete"), "/v1/responses", true, clean, "Hello", nil},
		{"responses, EOF", "/v1/responses", responsesReq, "openai", responsesStream("Hello", "response.completed")[:6], "/v1/responses", false, responsesTruncated, "Hello", []string{"response.completed"}},
		{"messages from a chat upstream, [DONE]", "/v1/messages", messagesReq, "chat", chatStream("Hello"), "/v1/chat/completions", false, clean, "Hello", nil},
		{"messages from a chat upstream, EOF", "/v1/messages", messagesReq, "chat", chatStream("Hello")[:1], "/v1/chat/completions", false, messagesTruncated, "Hello", []string{"message_stop"}},
		{"responses from a chat upstream, [DONE]", "/v1/responses", responsesReq, "chat", chatStream("Hello"), "/v1/chat/completions", false, clean, "Hello", nil},
		{"responses from a chat upstream, EOF", "/v1/responses", responsesReq, "chat", chatStream("Hello")[:1], "/v1/chat/completions", false, responsesTruncated, "Hello", []string{"response.completed"}},
		{"chat from an anthropic upstream, message_stop", "/v1/chat/completions", chatStreamReq, "anthropic", messagesStream("Hello"), "/v1/messages", false, clean, "Hello", nil},
		{"chat from an anthropic upstream, EOF", "/v1/chat/completions", chatStreamReq, "anthropic", messagesStream("Hello")[:5], "/v1/messages", false, openaiTruncated, "Hello", []string{"[DONE]"}},
		{"passed through, EOF", "/v1/threads/runs", `{"model":"loop","stream":true,"assistant_id":"asst_1"}`, "openai", runs, "/v1/threads/runs", true, clean, "Hello", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u := fakeUpstream("u", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, c.blocks...) })
			lr := startLoop(t, soloConfig(c.api, ""), u)
			res := lr.post(c.path, c.body, anthropicHeader, "2023-06-01")
			res.expect(t, http.StatusOK, "u", "1")
			if seen := u.requests(); len(seen) != 1 || seen[0].path != c.upPath {
				t.Fatalf("the upstream was sent %d requests (want 1, to %s)", len(seen), c.upPath)
			}
			if c.exact && res.body != strings.Join(c.blocks, "") {
				t.Errorf("body:\n%s\nwant the upstream's stream exactly:\n%s", res.body, strings.Join(c.blocks, ""))
			}
			if !strings.Contains(res.body, c.text) {
				t.Errorf("the answer's text %q is missing:\n%s", c.text, res.body)
			}
			for _, n := range c.none {
				if strings.Contains(res.body, n) {
					t.Errorf("%q in a stream that was cut off:\n%s", n, res.body)
				}
			}
			evs := res.events()
			if len(evs) == 0 {
				t.Fatalf("no events:\n%s", res.body)
			}
			last := evs[len(evs)-1]
			isErr := last.typ == "error" || errorCode(last.data) != ""
			switch {
			case c.end == clean && isErr:
				t.Errorf("a complete stream ended with an error event:\n%s", res.body)
			case c.end == clean && strings.Contains(res.body, "upstream_stream_truncated"):
				t.Errorf("a complete stream was called truncated:\n%s", res.body)
			case c.end != clean && (!isErr || !strings.Contains(last.data, c.end)):
				t.Errorf("last event %+v; want the relay's error carrying %s", last, c.end)
			}
		})
	}
}

// Non-stream answers pass byte for byte whatever their endpoint; one
// broken after its first bytes aborts the client's connection (as
// reverse_proxy does) rather than ending as a short body that looks
// complete.
func TestLoopNonStreamPassThrough(t *testing.T) {
	const embeddings = `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`
	u := fakeUpstream("u", func(n int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(embeddings[:40]))
		if n == 2 {
			breakOff(w)
			return
		}
		_, _ = w.Write([]byte(embeddings[40:]))
	})
	lr := startLoop(t, soloConfig("openai", ""), u)
	res := lr.post("/v1/embeddings", `{"model":"loop","input":"hi"}`)
	res.expect(t, http.StatusOK, "u", "1")
	if res.body != embeddings || res.aborted {
		t.Errorf("body %s (aborted %v), want the upstream's", res.body, res.aborted)
	}
	res = lr.post("/v1/embeddings", `{"model":"loop","input":"hi"}`)
	if !res.aborted {
		t.Errorf("a body broken after its commit was not aborted: status %d body %s", res.status, res.body)
	}
	if seen := u.requests(); len(seen) != 2 || seen[0].path != "/v1/embeddings" {
		t.Errorf("the upstream saw %d requests", len(seen))
	}
}

// unreadableChat is a Chat stream with an event the translators cannot
// read (a chunk that is not JSON) after its first content.
var unreadableChat = []string{
	data(chatChunk("Hello")),
	data(`{"choices":[{"index":0,"delta":{"content":"secret`),
	data(chatChunk(" world")),
	data(chatStop),
	data("[DONE]"),
}

// An upstream event a translator cannot read ends the client's stream
// with upstream_event_unreadable after what came before it, never a clean
// end with something missing; before the commit point it fails over.
func TestLoopUnreadableUpstreamEvent(t *testing.T) {
	for _, c := range []struct{ path, body, wantErr, end string }{
		{"/v1/messages", messagesReq, `{"type":"error","error":{"type":"api_error","message":"The upstream sent an event the relay cannot read`, "message_stop"},
		{"/v1/responses", responsesReq, `"code":"upstream_event_unreadable"`, "response.completed"},
	} {
		t.Run("after the commit point "+c.path, func(t *testing.T) {
			t.Parallel()
			u := fakeUpstream("u", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, unreadableChat...) })
			lr := startLoop(t, soloConfig("chat", ""), u)
			res := lr.post(c.path, c.body, anthropicHeader, "2023-06-01")
			res.expect(t, http.StatusOK, "u", "1")
			evs := res.events()
			if !strings.Contains(res.body, "Hello") || len(evs) == 0 || evs[len(evs)-1].typ != "error" || !strings.Contains(evs[len(evs)-1].data, c.wantErr) {
				t.Errorf("want Hello, then the relay's error %s:\n%s", c.wantErr, res.body)
			}
			for _, lost := range []string{"world", "secret", c.end} {
				if strings.Contains(res.body, lost) {
					t.Errorf("%q in the stream after the unreadable event:\n%s", lost, res.body)
				}
			}
		})
		t.Run("before the commit point "+c.path, func(t *testing.T) {
			t.Parallel()
			// A second choice: the translated request asked for one.
			a := fakeUpstream("a", func(_ int, w http.ResponseWriter, _ *http.Request) {
				sendSSE(w, data(`{"id":"c1","choices":[{"index":1,"delta":{"content":"other"}}]}`), data(chatChunk("x")), data("[DONE]"))
			})
			b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, chatStream("Hello")...) })
			lr := startLoop(t, `{
				"upstreams": [{"name": "a", "api": "chat"}, {"name": "b", "api": "chat"}],
				"models": [{"alias": "loop", "targets": [{"upstream": "a"}, {"upstream": "b"}]}],
				"failover": {"backoff_base": "1ms", "backoff_max": "1ms"}
			}`, a, b)
			res := lr.post(c.path, c.body, anthropicHeader, "2023-06-01")
			res.expect(t, http.StatusOK, "b", "2")
			if !strings.Contains(res.body, "Hello") || !strings.Contains(res.body, c.end) || strings.Contains(res.body, "other") {
				t.Errorf("want b's whole answer only:\n%s", res.body)
			}
			lr.expectSeen(t, map[string]int{"a": 1, "b": 1})
		})
	}
}

// A Chat stream whose reasoning passes the budget, with the failover
// action and before any answer, moves to the next target on the same
// client stream: the client gets the first target's reasoning up to the
// budget, then the next target's whole answer, one [DONE] and no error.
// A Messages stream is one message: there the failover action ends it
// with reasoning_budget_exceeded, and no other target is tried.
func TestLoopReasoningBudgetFailover(t *testing.T) {
	t.Run("chat", func(t *testing.T) {
		t.Parallel()
		var thinking []string
		for range 40 {
			thinking = append(thinking, data(chatReasoning("thinking hard about it ")))
		}
		a := fakeUpstream("a", func(_ int, w http.ResponseWriter, r *http.Request) {
			sendSSE(w, thinking...)
			hang(r) // never finishes by itself: the relay gives it up
		})
		answer := chatStream("the", " answer")
		rec := newStreamRecorder()
		b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) {
			// b is slow: heartbeats keep the committed stream alive.
			rec.await(t, "a heartbeat after the reasoning", func(body string) bool { return strings.HasSuffix(body, hb) })
			sendSSE(w, answer...)
		})
		lr := startLoop(t, chainAB("", `"reasoning_budget": {"tokens": 10, "action": "failover"}`,
			`"smoothing": {"mode": "off", "heartbeat": "50ms"}`), a, b)

		lr.serve(context.Background(), rec, "/v1/chat/completions", chatStreamReq)
		// The pause's heartbeats stop with it: none may come after the
		// response is over (a timer that outlived the request would write
		// into a finished response, which crashes a server).
		time.Sleep(150 * time.Millisecond)
		res := rec.result()
		// The headers went out with a's stream.
		res.expect(t, http.StatusOK, "a", "1")
		if pause := res.body[strings.LastIndex(res.body, "reasoning_content"):strings.Index(res.body, `"content":"the"`)]; !strings.Contains(pause, hb) {
			t.Errorf("no heartbeat during the pause between the two streams:\n%s", res.body)
		}
		d := res.datas()
		reasoning := 0
		for reasoning < len(d) && d[reasoning] == chatReasoning("thinking hard about it ") {
			reasoning++
		}
		if reasoning == 0 || reasoning >= len(thinking) {
			t.Errorf("%d of a's %d reasoning chunks reached the client; want some, up to the budget", reasoning, len(thinking))
		}
		var want []string
		for _, blk := range answer {
			want = append(want, strings.TrimSuffix(strings.TrimPrefix(blk, "data: "), "\n\n"))
		}
		if got := d[reasoning:]; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("after a's reasoning: %q\nwant b's whole answer: %q", got, want)
		}
		if strings.Count(res.body, "[DONE]") != 1 || strings.Contains(res.body, `"error"`) {
			t.Errorf("want one [DONE] and no error:\n%s", res.body)
		}
		lr.expectSeen(t, map[string]int{"a": 1, "b": 1})
		if m := b.requests()[0].field("model"); m != "model-b" {
			t.Errorf("b was sent model %v", m)
		}
	})
	t.Run("messages", func(t *testing.T) {
		t.Parallel()
		blocks := []string{msgStart("msg_a"), msgBlockStart("thinking")}
		for range 40 {
			blocks = append(blocks, msgDelta("thinking", "thinking hard about it "))
		}
		a := fakeUpstream("a", func(_ int, w http.ResponseWriter, r *http.Request) {
			sendSSE(w, blocks...)
			hang(r)
		})
		b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, messagesStream("answer")...) })
		lr := startLoop(t, `{
			"upstreams": [{"name": "a", "api": "anthropic"}, {"name": "b", "api": "anthropic"}],
			"models": [{"alias": "loop", "targets": [{"upstream": "a"}, {"upstream": "b"}], "reasoning_budget": {"tokens": 10, "action": "failover"}}]
		}`, a, b)
		res := lr.post("/v1/messages", messagesReq, anthropicHeader, "2023-06-01")
		res.expect(t, http.StatusOK, "a", "1")
		evs := res.events()
		if len(evs) == 0 || evs[len(evs)-1].typ != "error" || !strings.Contains(evs[len(evs)-1].data, "The reasoning passed this request's budget of 10 tokens.") {
			t.Errorf("want the stream to end with the budget's error:\n%s", res.body)
		}
		if strings.Contains(res.body, "answer") || strings.Contains(res.body, "message_stop") {
			t.Errorf("another message followed on the stream:\n%s", res.body)
		}
		lr.expectSeen(t, map[string]int{"a": 1, "b": 0})
	})
}

// The commit point of each client endpoint is its first content: the
// events before it (Messages' message_start, content_block_start and
// ping; the Responses API's created, in_progress and the item and part
// announcements; a Chat chunk that only names the role, translated for
// either) are held, so an upstream that fails after them is failed over
// invisibly and the client gets the next target's stream alone.
func TestLoopCommitPointPerEndpoint(t *testing.T) {
	const overloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	const roleChunk = `{"id":"c0","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	for _, c := range []struct {
		name, path, body, api string
		failing               func(w http.ResponseWriter)
		good                  []string
		exact                 bool   // the client gets good's bytes exactly
		end                   string // else: its stream ends with this event
	}{
		{"messages", "/v1/messages", messagesReq, "anthropic", func(w http.ResponseWriter) {
			sendSSE(w, msgStart("msg_bad"), msgBlockStart("text"), event("ping", `{"type": "ping"}`), event("error", overloaded))
		}, messagesStream("Hello"), true, ""},
		{"responses", "/v1/responses", responsesReq, "openai", func(w http.ResponseWriter) {
			sendSSE(w, responsesStream("never", "response.completed")[:4]...)
			breakOff(w)
		}, responsesStream("Hello", "response.completed"), true, ""},
		{"messages from a chat upstream", "/v1/messages", messagesReq, "chat", func(w http.ResponseWriter) {
			sendSSE(w, data(roleChunk), data(`{"error":{"message":"overloaded","type":"server_error","code":"overloaded"}}`))
		}, chatStream("Hello"), false, "message_stop"},
		{"responses from a chat upstream", "/v1/responses", responsesReq, "chat", func(w http.ResponseWriter) {
			sendSSE(w, data(roleChunk))
			breakOff(w)
		}, chatStream("Hello"), false, "response.completed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := fakeUpstream("a", func(_ int, w http.ResponseWriter, _ *http.Request) { c.failing(w) })
			b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, c.good...) })
			lr := startLoop(t, `{
				"upstreams": [{"name": "a", "api": "`+c.api+`"}, {"name": "b", "api": "`+c.api+`"}],
				"models": [{"alias": "loop", "targets": [{"upstream": "a"}, {"upstream": "b"}]}]
			}`, a, b)
			res := lr.post(c.path, c.body, anthropicHeader, "2023-06-01")
			res.expect(t, http.StatusOK, "b", "2")
			if c.exact && res.body != strings.Join(c.good, "") {
				t.Errorf("body:\n%s\nwant b's stream exactly:\n%s", res.body, strings.Join(c.good, ""))
			}
			evs := res.events()
			if !c.exact && (len(evs) == 0 || evs[len(evs)-1].typ != c.end || !strings.Contains(res.body, "Hello")) {
				t.Errorf("want b's answer, ending with %s:\n%s", c.end, res.body)
			}
			starts := 0
			for _, ev := range evs {
				if ev.typ == "message_start" || ev.typ == "response.created" {
					starts++
				}
			}
			if starts != 1 || strings.Contains(res.body, "bad") || strings.Contains(res.body, "never") || strings.Contains(res.body, "verloaded") {
				t.Errorf("something of a's reached the client:\n%s", res.body)
			}
			lr.expectSeen(t, map[string]int{"a": 1, "b": 1})
		})
	}
}

// An upstream silent for stream_idle_timeout after the commit point is cut
// off: the client's stream ends with the in-band upstream_timeout, though
// the relay's heartbeats kept its connection busy meanwhile.
func TestLoopStreamIdleTimeout(t *testing.T) {
	u := fakeUpstream("u", func(_ int, w http.ResponseWriter, r *http.Request) {
		sendSSE(w, data(chatChunk("Hello")))
		hang(r)
	})
	lr := startLoop(t, soloConfig("openai", `"failover": {"stream_idle_timeout": "100ms"}`), u)
	res := lr.post("/v1/chat/completions", chatStreamReq)
	res.expect(t, http.StatusOK, "u", "1")
	d := res.datas()
	if len(d) != 2 || d[0] != chatChunk("Hello") || errorCode(d[1]) != "upstream_timeout" {
		t.Errorf("events %q; want Hello, then the in-band upstream_timeout", d)
	}
}

// An upstream's own error event after the commit point reaches the client
// (in the client's shape: a translated Responses stream gets the error
// event and response.failed, as OpenAI sends them), and ends the stream:
// the relay adds no error of its own after it, as the stream did not end
// silently.
func TestLoopUpstreamErrorAfterCommit(t *testing.T) {
	const msg = "the upstream gave up"
	chatErr := data(`{"error":{"message":"` + msg + `","type":"server_error","param":null,"code":"server_error"}}`)
	for _, c := range []struct {
		name, path, body, api string
		blocks                []string
	}{
		{"chat", "/v1/chat/completions", chatStreamReq, "openai", []string{data(chatChunk("Hello")), chatErr}},
		{"messages", "/v1/messages", messagesReq, "anthropic", []string{msgStart("msg_1"), msgBlockStart("text"), msgDelta("text", "Hello"),
			event("error", `{"type":"error","error":{"type":"overloaded_error","message":"`+msg+`"}}`)}},
		{"responses, error", "/v1/responses", responsesReq, "openai", append(responsesStream("Hello", "response.completed")[:5],
			respEvent(5, "error", `"code":"server_error","message":"`+msg+`","param":null`))},
		{"responses, response.failed", "/v1/responses", responsesReq, "openai", append(responsesStream("Hello", "response.completed")[:5],
			respEvent(5, "response.failed", `"response":{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"`+msg+`"},"output":[]}`))},
		{"messages from a chat upstream", "/v1/messages", messagesReq, "chat", []string{data(chatChunk("Hello")), chatErr}},
		{"responses from a chat upstream", "/v1/responses", responsesReq, "chat", []string{data(chatChunk("Hello")), chatErr}},
		{"chat from an anthropic upstream", "/v1/chat/completions", chatStreamReq, "anthropic", []string{msgStart("msg_1"), msgBlockStart("text"), msgDelta("text", "Hello"),
			event("error", `{"type":"error","error":{"type":"overloaded_error","message":"`+msg+`"}}`)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u := fakeUpstream("u", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, c.blocks...) })
			lr := startLoop(t, soloConfig(c.api, ""), u)
			res := lr.post(c.path, c.body, anthropicHeader, "2023-06-01")
			res.expect(t, http.StatusOK, "u", "1")
			evs := res.events()
			if len(evs) == 0 || !strings.Contains(evs[len(evs)-1].data, msg) || !strings.Contains(res.body, "Hello") {
				t.Errorf("want Hello, then the upstream's error as the last event:\n%s", res.body)
			}
			for _, own := range []string{"upstream_stream_truncated", "The upstream closed the stream", "upstream_stream_interrupted", "broke off"} {
				if strings.Contains(res.body, own) {
					t.Errorf("the relay added an error of its own (%q) to the upstream's:\n%s", own, res.body)
				}
			}
		})
	}
}

// What a client endpoint means beyond its streams: count_tokens is
// answered from the relay's estimate when no target speaks it; an
// endpoint a target's api lacks skips that target without an attempt.
func TestLoopEndpointKinds(t *testing.T) {
	const countReq = `{"model":"loop","messages":[{"role":"user","content":"hello there, how are you today?"}]}`
	t.Run("count_tokens estimated", func(t *testing.T) {
		t.Parallel()
		u := fakeUpstream("u", func(_ int, w http.ResponseWriter, _ *http.Request) { sendJSON(w, 200, okChatAnswer) })
		lr := startLoop(t, soloConfig("chat", ""), u)
		res := lr.post("/v1/messages/count_tokens", countReq, anthropicHeader, "2023-06-01")
		var got struct {
			InputTokens int `json:"input_tokens"`
		}
		if res.status != 200 || res.header.Get("X-Relay-Estimated") != "true" || json.Unmarshal([]byte(res.body), &got) != nil || got.InputTokens <= 0 {
			t.Errorf("status %d headers %v body %s; want the relay's estimate", res.status, res.header, res.body)
		}
		lr.expectSeen(t, map[string]int{"u": 0})
	})
	t.Run("count_tokens from an anthropic upstream", func(t *testing.T) {
		t.Parallel()
		u := fakeUpstream("u", func(_ int, w http.ResponseWriter, _ *http.Request) { sendJSON(w, 200, `{"input_tokens":42}`) })
		lr := startLoop(t, soloConfig("anthropic", ""), u)
		res := lr.post("/v1/messages/count_tokens", countReq, anthropicHeader, "2023-06-01")
		res.expect(t, http.StatusOK, "u", "1")
		if res.body != `{"input_tokens":42}` || res.header.Get("X-Relay-Estimated") != "" {
			t.Errorf("body %s headers %v; want the upstream's count", res.body, res.header)
		}
		if seen := u.requests(); len(seen) != 1 || seen[0].path != "/v1/messages/count_tokens" {
			t.Errorf("the upstream saw %+v", seen)
		}
	})
	t.Run("an endpoint the first target lacks", func(t *testing.T) {
		t.Parallel()
		const embeddings = `{"object":"list","data":[],"model":"m"}`
		a := fakeUpstream("a", func(_ int, w http.ResponseWriter, _ *http.Request) { sendJSON(w, 200, okChatAnswer) })
		b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) { sendJSON(w, 200, embeddings) })
		lr := startLoop(t, `{
			"upstreams": [{"name": "a", "api": "anthropic"}, {"name": "b"}],
			"models": [{"alias": "loop", "targets": [{"upstream": "a"}, {"upstream": "b"}]}],
			"failover": {"attempts": 1}
		}`, a, b)
		res := lr.post("/v1/embeddings", `{"model":"loop","input":"hi"}`)
		res.expect(t, http.StatusOK, "b", "1")
		if res.body != embeddings {
			t.Errorf("body %s", res.body)
		}
		lr.expectSeen(t, map[string]int{"a": 0, "b": 1})
	})
}

// The relay's own errors, and an upstream's passed on, are in the
// client's dialect: OpenAI's {"error":{...}} for Chat and Responses
// clients, Anthropic's {"type":"error","error":{...}} for Messages
// clients, translated when the upstream speaks the other.
func TestLoopErrorsInTheClientsShape(t *testing.T) {
	const openaiBad = `{"error":{"message":"messages: too long","type":"invalid_request_error","param":null,"code":"context_length_exceeded"}}`
	const anthropicBad = `{"type":"error","error":{"type":"invalid_request_error","message":"messages: too long"}}`
	for _, c := range []struct {
		name, path, body, api string
		status                int    // the upstream's
		answer                string // the upstream's body
		want                  int    // the client's status
		shape                 string // in the client's body
	}{
		{"chat, all failed", "/v1/chat/completions", chatReq, "openai", 503, `{}`, 502, `{"error":{"message":"All upstream attempts failed`},
		{"responses, all failed", "/v1/responses", `{"model":"loop","input":"hi"}`, "openai", 503, `{}`, 502, `{"error":{"message":"All upstream attempts failed`},
		{"messages, all failed", "/v1/messages", `{"model":"loop","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`, "anthropic", 503, `{}`, 502,
			`{"type":"error","error":{"type":"api_error","message":"All upstream attempts failed`},
		{"messages from a chat upstream's 400", "/v1/messages", `{"model":"loop","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`, "chat", 400, openaiBad, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"messages: too long"}}`},
		{"chat from an anthropic upstream's 400", "/v1/chat/completions", chatReq, "anthropic", 400, anthropicBad, 400,
			`"error":{"message":"messages: too long","type":"invalid_request_error"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u := fakeUpstream("u", func(_ int, w http.ResponseWriter, _ *http.Request) { sendJSON(w, c.status, c.answer) })
			lr := startLoop(t, soloConfig(c.api, ""), u)
			res := lr.post(c.path, c.body, anthropicHeader, "2023-06-01")
			if res.status != c.want || !strings.Contains(res.body, c.shape) || res.header.Get("Content-Type") != "application/json" {
				t.Errorf("%d %v %s; want %d with %s", res.status, res.header, res.body, c.want, c.shape)
			}
		})
	}
}
