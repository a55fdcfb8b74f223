package llmrelay_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// responsesEvent is one Responses API stream event: `event: <type>` and
// data carrying the same type and a sequence number.
func responsesEvent(seq int, typ, members string) string {
	if members != "" {
		members = "," + members
	}
	return fmt.Sprintf("event: %s\ndata: {\"type\":%q,\"sequence_number\":%d%s}\n\n", typ, typ, seq, members)
}

// responsesStream is a complete Responses stream answering text, from
// response id id.
func responsesStream(id, text string) string {
	resp := `"response":{"id":"` + id + `","object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}`
	item := `{"type":"message","id":"msg_` + id + `","status":"completed","role":"assistant","content":[{"type":"output_text","text":"` + text + `","annotations":[]}]}`
	done := `"response":{"id":"` + id + `","object":"response","created_at":1,"status":"completed","model":"m","output":[` + item + `],"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":7}}`
	return responsesEvent(0, "response.created", resp) +
		responsesEvent(1, "response.in_progress", resp) +
		responsesEvent(2, "response.output_item.added", `"output_index":0,"item":{"type":"message","id":"msg_`+id+`","status":"in_progress","role":"assistant","content":[]}`) +
		responsesEvent(3, "response.content_part.added", `"item_id":"msg_`+id+`","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}`) +
		responsesEvent(4, "response.output_text.delta", `"item_id":"msg_`+id+`","output_index":0,"content_index":0,"delta":"`+text+`","logprobs":[]`) +
		responsesEvent(5, "response.output_text.done", `"item_id":"msg_`+id+`","output_index":0,"content_index":0,"text":"`+text+`","logprobs":[]`) +
		responsesEvent(6, "response.content_part.done", `"item_id":"msg_`+id+`","output_index":0,"content_index":0,"part":{"type":"output_text","text":"`+text+`","annotations":[]}`) +
		responsesEvent(7, "response.output_item.done", `"output_index":0,"item":`+item) +
		responsesEvent(8, "response.completed", done)
}

// streamResponses runs a Responses stream with openai-go and returns the
// ids of the responses its events named, the text, and the stream error.
func streamResponses(t *testing.T, model string) (ids []string, text string, err error) {
	t.Helper()
	client := openai.NewClient(option.WithBaseURL(relayBase+"/v1"), option.WithAPIKey("sk-none"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	defer s.Close()
	var b strings.Builder
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.created", "response.completed":
			ids = append(ids, ev.Response.ID)
		case "response.output_text.delta":
			b.WriteString(ev.Delta)
		}
	}
	return ids, b.String(), s.Err()
}

// The commit point of a Responses stream is its first output delta:
// response.created and the item and part announcements are held, so an
// upstream that fails after them is failed over invisibly, and openai-go
// sees one response, the second upstream's.
func TestResponsesCommitPointAfterCreated(t *testing.T) {
	failing := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		full := responsesStream("resp_bad", "never")
		_, _ = w.Write([]byte(full[:strings.Index(full, "event: response.output_text.delta")]))
		_, _ = w.Write([]byte(responsesEvent(4, "error", `"code":"server_error","message":"overloaded","param":null`)))
	})
	good := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(responsesStream("resp_good", "hello")))
	})
	startRelay(t, `llm_relay {
		upstream failing `+failing.v1()+`
		upstream good `+good.v1()+`
		model m {
			to failing
			to good
		}
	}`)
	ids, text, err := streamResponses(t, "m")
	if err != nil || text != "hello" || strings.Join(ids, ",") != "resp_good,resp_good" {
		t.Fatalf("openai-go saw responses %v, text %q, error %v; want only resp_good, hello, no error", ids, text, err)
	}
	if len(failing.requests()) != 1 || failing.requests()[0].path != "/v1/responses" {
		t.Fatalf("the first upstream saw %v", failing.requests())
	}
}

// A relay error on a committed Responses stream is an `event: error` that
// openai-go raises, never a clean-looking shorter answer.
func TestResponsesRelayErrorAfterCommitRaised(t *testing.T) {
	early := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		time.Sleep(400 * time.Millisecond) // past early_commit: headers are out
		answerJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"down","type":"server_error","code":"unavailable"}}`)
	})
	startRelay(t, `llm_relay {
		upstream early `+early.v1()+`
		model m {
			to early
		}
		smoothing off {
			early_commit 100ms
		}
	}`)
	_, text, err := streamResponses(t, "m")
	if err == nil || text != "" {
		t.Fatalf("openai-go got text %q and no error; want the stream to raise", text)
	}
	if !strings.Contains(err.Error(), "all_upstreams_failed") {
		t.Errorf("the error does not say what failed: %v", err)
	}
	// On the wire it is the Responses API's own error event (typed, as
	// Responses clients such as Codex CLI read events by type), with the
	// "error" member the SDKs raise on.
	raw := readAll(t, postPath(t, "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`))
	if !strings.Contains(raw, "event: error\ndata: {\"type\":\"error\",\"code\":\"all_upstreams_failed\"") || !strings.Contains(raw, `"error":{"message":`) {
		t.Errorf("the stream's error event:\n%s", raw)
	}
}

// Stored responses are asked of the OpenAI upstreams in order, the first
// answer that is not a 404 wins (the relay remembers nothing); a relay with
// no OpenAI upstream answers a clear 400.
func TestStoredResponsesAskTheOpenAIUpstreams(t *testing.T) {
	const stored = `{"id":"resp_42","object":"response","created_at":1,"status":"completed","model":"m","output":[],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`
	other := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, http.StatusNotFound, `{"error":{"message":"No response found","type":"invalid_request_error","code":null}}`)
	})
	maker := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/responses/resp_42") {
			answerJSON(w, http.StatusNotFound, `{"error":{"message":"no","type":"invalid_request_error"}}`)
			return
		}
		answerJSON(w, http.StatusOK, stored)
	})
	claude := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		t.Error("a stored-response call reached an Anthropic upstream")
	})
	startRelay(t, `llm_relay {
		upstream other `+other.v1()+` {
			api_key sk-other
		}
		upstream claude `+claude.v1()+` {
			api anthropic
		}
		upstream maker `+maker.v1()+` {
			api_key sk-maker
		}
		model m {
			to other
		}
	}`)
	client := openai.NewClient(option.WithBaseURL(relayBase+"/v1"), option.WithAPIKey("sk-none"), option.WithMaxRetries(0))
	got, err := client.Responses.Get(context.Background(), "resp_42", responses.ResponseGetParams{})
	if err != nil || got.ID != "resp_42" || got.Status != "completed" {
		t.Fatalf("Get: %v, %+v", err, got)
	}
	if seen := maker.requests(); len(seen) != 1 || seen[0].header.Get("Authorization") != "Bearer sk-maker" {
		t.Fatalf("the maker saw %+v", seen)
	}
	resp := postPath(t, "/v1/responses/resp_42/cancel", ``)
	if readAll(t, resp); resp.StatusCode != http.StatusOK || maker.requests()[1].path != "/v1/responses/resp_42/cancel" {
		t.Fatalf("cancel: status %d, maker saw %v", resp.StatusCode, maker.requests()[1].path)
	}
	// Not found anywhere: the last upstream's 404.
	if _, err := client.Responses.Get(context.Background(), "resp_nowhere", responses.ResponseGetParams{}); err == nil {
		t.Fatal("a response no upstream has was found")
	} else if apiErr, ok := err.(*openai.Error); !ok || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("want the upstreams' 404, got %v", err)
	}

	// No OpenAI upstream: nothing to ask.
	startRelay(t, `llm_relay {
		upstream claude `+claude.v1()+` {
			api anthropic
		}
		model m {
			to claude
		}
	}`)
	resp, err = httpClient.Get(relayBase + "/v1/responses/resp_42")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "stored_response_unavailable") {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
}

// responsesRelay offers the one simulator three ways: natively (api
// openai), as a Chat Completions provider and as Anthropic.
const responsesRelay = `llm_relay {
		key sk-relay-responses
		upstream native ` + simV1 + `
		upstream simchat ` + simV1 + ` {
			api chat
		}
		upstream simanth ` + simV1 + ` {
			api anthropic
		}
		upstream down http://127.0.0.1:9084/fail/v1
		model native {
			to native sim-reasoner
		}
		model via-chat {
			to simchat sim-reasoner
		}
		model via-claude {
			to simanth sim-reasoner
		}
		model down-then-chat {
			to down
			to simchat sim-reasoner
		}
		failover {
			backoff 1ms 1ms
		}
	}`

func responsesClient() openai.Client {
	return openai.NewClient(option.WithBaseURL(relayBase+"/v1"), option.WithAPIKey("sk-relay-responses"), option.WithMaxRetries(0))
}

// openai-go's Responses calls, streaming and not, answer the simulator's
// text whether the target speaks Responses itself, Chat Completions or
// Anthropic Messages (translated); a failover from a failing native target
// to a translated one stays invisible; a tool call round trip works; relay
// errors are typed.
func TestOpenAIGoResponses(t *testing.T) {
	startRelay(t, responsesRelay, clientsSimSite)
	_, want := directChat(t, simV1)
	client := responsesClient()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, model := range []string{"native", "via-chat", "via-claude", "down-then-chat"} {
		params := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
		got, err := client.Responses.New(ctx, params)
		if err != nil || got.OutputText() != want || got.Status != "completed" || got.Usage.OutputTokens == 0 {
			t.Fatalf("%s: New: %v, text %q status %q usage %+v; want %q", model, err, got.OutputText(), got.Status, got.Usage, want)
		}
		s := client.Responses.NewStreaming(ctx, params)
		var text strings.Builder
		var completed responses.Response
		for s.Next() {
			switch ev := s.Current(); ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
			case "response.completed":
				completed = ev.Response
			}
		}
		if err := s.Err(); err != nil || text.String() != want || completed.OutputText() != want {
			t.Fatalf("%s: stream: %v, deltas %q, completed %q; want %q", model, err, text.String(), completed.OutputText(), want)
		}
		_ = s.Close()
	}

	// A tool round trip, translated: a forced function call, then its
	// output, then the text answer.
	tool := responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object", "properties": map[string]any{"input": map[string]any{"type": "string"}}}, false)
	for _, model := range []string{"native", "via-chat", "via-claude"} {
		first, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model:      model,
			Input:      responses.ResponseNewParamsInputUnion{OfString: openai.String("weather?")},
			Tools:      []responses.ToolUnionParam{tool},
			ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)},
		})
		if err != nil {
			t.Fatalf("%s: tool call: %v", model, err)
		}
		var call responses.ResponseOutputItemUnion
		for _, it := range first.Output {
			if it.Type == "function_call" {
				call = it
			}
		}
		if call.Name != "get_weather" || call.CallID == "" || !strings.Contains(call.Arguments.OfString, "sim") {
			t.Fatalf("%s: want a get_weather call, got %+v", model, first.Output)
		}
		second, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: model,
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("weather?", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfFunctionCall(call.Arguments.OfString, call.CallID, call.Name),
				{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String(call.CallID), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("sunny")}}},
			}},
			Tools: []responses.ToolUnionParam{tool},
		})
		if err != nil || second.OutputText() != want {
			t.Fatalf("%s: after the tool output: %v, text %q", model, err, second.OutputText())
		}
	}

	// Typed errors: an unknown model, a request no target can take.
	_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "nope", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if apiErr, ok := err.(*openai.Error); !ok || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown model: %v", err)
	}
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "via-chat", PreviousResponseID: openai.String("resp_1"), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if apiErr, ok := err.(*openai.Error); !ok || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "previous_response_id") || apiErr.Code != "untranslatable_request" {
		t.Fatalf("previous_response_id to a Chat target: %v %s", err, apiErrJSON(err))
	}
	// The 400 names the target it could not translate for, as the client
	// needs it to fix the chain or the call: upstream, model and api.
	if apiErr := err.(*openai.Error); !strings.Contains(apiErr.Message, "translating for upstream simchat, model sim-reasoner, api chat") {
		t.Errorf("previous_response_id to a Chat target: the 400 does not name the target: %s", apiErr.Message)
	}
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "via-claude", Store: openai.Bool(true), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if apiErr, ok := err.(*openai.Error); !ok || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "untranslatable_request" ||
		!strings.Contains(apiErr.Message, "store") || !strings.Contains(apiErr.Message, "translating for upstream simanth, model sim-reasoner, api anthropic") {
		t.Errorf("store: true to an Anthropic target: %v %s", err, apiErrJSON(err))
	}
}

func apiErrJSON(err error) string {
	if apiErr, ok := err.(*openai.Error); ok {
		return apiErr.RawJSON()
	}
	return ""
}

// A Responses stream that ends without response.completed is truncated:
// the client gets the relay's error event, which openai-go raises, never a
// clean-looking shorter answer.
func TestResponsesTruncatedStreamRaised(t *testing.T) {
	cut := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		full := responsesStream("resp_cut", "hello")
		_, _ = w.Write([]byte(full[:strings.Index(full, "event: response.output_text.done")]))
	})
	startRelay(t, `llm_relay {
		upstream cut `+cut.v1()+`
		model m {
			to cut
		}
	}`)
	_, text, err := streamResponses(t, "m")
	if err == nil || !strings.Contains(err.Error(), "upstream_stream_truncated") || text != "hello" {
		t.Fatalf("text %q, error %v; want hello then the truncation raised", text, err)
	}
}

// Responses requests are accounted from the response's own usage, streamed
// and not, and a shadow copy translated for a Chat provider is compared
// with the client's Responses answer: the same simulator text is a
// similarity of 1.
func TestResponsesUsageAndShadow(t *testing.T) {
	logFile := startRelay(t, `llm_relay {
		upstream native `+simV1+`
		upstream simchat `+simV1+` {
			api chat
		}
		model native {
			to native sim-reasoner
			shadow simchat sim-reasoner 100
		}
	}`, clientsSimSite)
	for i, stream := range []bool{false, true} {
		body := `{"model":"native","input":"hi","stream":` + map[bool]string{false: "false", true: "true"}[stream] + `}`
		resp := postPath(t, "/v1/responses", body)
		if got := readAll(t, resp); resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %v: status %d: %s", stream, resp.StatusCode, got)
		}
		waitFor(t, 5*time.Second, "the shadow comparison", func() bool {
			doc := getRelayStatus(t)
			return len(doc.Shadows) == 1 && doc.Shadows[0].Stats.Compared == int64(i+1)
		})
	}
	st := getRelayStatus(t).Shadows[0].Stats
	if st.OK != 2 || st.MeanSimilarity != 1 || st.MeanLengthRat != 1 {
		t.Errorf("shadow stats %+v; want 2 ok, similarity 1, length ratio 1", st)
	}
	var relayed []string
	for _, line := range strings.Split(readLog(t, logFile), "\n") {
		if strings.Contains(line, `"msg":"relayed"`) {
			relayed = append(relayed, line)
		}
	}
	if len(relayed) != 2 {
		t.Fatalf("relayed %d requests:\n%s", len(relayed), strings.Join(relayed, "\n"))
	}
	for _, line := range relayed {
		if !strings.Contains(line, `"usage_estimated":false`) || strings.Contains(line, `"completion_tokens":0,`) {
			t.Errorf("not accounted from the response's usage: %s", line)
		}
	}
}

// Heartbeats (SSE comments) before the commit point and between deltas
// are skipped by openai-go's Responses stream, which assembles the whole
// text.
func TestResponsesHeartbeats(t *testing.T) {
	slow := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		full := responsesStream("resp_slow", "hello")
		cut := strings.Index(full, "event: response.output_text.delta")
		_, _ = w.Write([]byte(full[:cut]))
		w.(http.Flusher).Flush()
		time.Sleep(500 * time.Millisecond) // before the first delta
		_, _ = w.Write([]byte(full[cut:]))
	})
	startRelay(t, `llm_relay {
		upstream slow `+slow.v1()+`
		model m {
			to slow
		}
		smoothing off {
			early_commit 100ms
			heartbeat 100ms
		}
	}`)
	raw := readAll(t, postPath(t, "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`))
	if !strings.Contains(raw[:strings.Index(raw, "response.output_text.delta")], ": keep-alive\n\n") {
		t.Fatalf("no heartbeat before the first delta:\n%s", raw)
	}
	ids, text, err := streamResponses(t, "m")
	if err != nil || text != "hello" || strings.Join(ids, ",") != "resp_slow,resp_slow" {
		t.Fatalf("openai-go: ids %v text %q error %v", ids, text, err)
	}
}
