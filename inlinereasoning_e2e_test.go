package llmrelay_test

// Inline reasoning (issue 27) through the official Go SDKs: a simulator
// that writes its reasoning into content between <think> tags, as a
// self-hosted model behind vLLM or Ollama without a reasoning parser does,
// reaches openai-go's Chat Completions as reasoning_content (or the name
// reasoning_field asks for), anthropic-sdk-go as a thinking block and
// openai-go's Responses as a reasoning item, each with the answer alone in
// its text, streaming and not. A scripted upstream checks that
// `reasoning_format auto` passes an answer that merely mentions <think>
// byte for byte.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

// taggedSimSite runs the tagged simulators on :9085 (the other e2e files
// use 9080-9084): /tags/ writes Qwen3's "<think>\n…\n</think>\n\n…",
// /unopened/ DeepSeek-R1's form without the opening tag, /fields/ the
// default reasoning_content unless the request's X-Sim-Reasoning-Form
// header picks a tags form. Each streamed answer cuts its tags at other
// places (the cuts are drawn per request), so repeated requests cover
// whole, glued and split tags.
const taggedSimSite = `http://127.0.0.1:9085 {
	handle /tags/* {
		llm_simulator {
			seed 27
			reasoning_tokens 24
			content_tokens 16
			pattern steady 0
			reasoning_form tags
		}
	}
	handle /unopened/* {
		llm_simulator {
			seed 27
			reasoning_tokens 24
			content_tokens 16
			pattern steady 0
			reasoning_form tags_unopened
		}
	}
	handle /fields/* {
		llm_simulator {
			seed 27
			reasoning_tokens 24
			content_tokens 16
			pattern steady 0
		}
	}
}`

const taggedKey = "sk-relay-tagged"

// taggedRelay offers the tagged simulators: reasoning_format on the
// upstream (tagged, unopened), in a `to` block over an upstream that has
// none (per-target, per-target-unopened), auto with the form picked by the
// client's header (via-header), each reasoning_field on the tagged ones,
// and untreated, the tags upstream read as fields, to show what the
// simulator sends.
const taggedRelay = `llm_relay {
	key ` + taggedKey + `
	upstream tags http://127.0.0.1:9085/tags/v1 {
		api chat
		reasoning_format tags
	}
	upstream unopened http://127.0.0.1:9085/unopened/v1 {
		api chat
		starts_in_reasoning
	}
	upstream rawtags http://127.0.0.1:9085/tags/v1 {
		api chat
	}
	upstream rawunopened http://127.0.0.1:9085/unopened/v1 {
		api chat
	}
	upstream autofields http://127.0.0.1:9085/fields/v1 {
		api chat
		reasoning_format auto
	}
	model tagged {
		to tags sim-reasoner
	}
	model unopened {
		to unopened sim-reasoner
	}
	model per-target {
		to rawtags sim-reasoner {
			reasoning_format tags
		}
	}
	model per-target-unopened {
		to rawunopened sim-reasoner {
			starts_in_reasoning true
		}
	}
	model via-header {
		to autofields sim-reasoner
	}
	model untreated {
		to rawtags sim-reasoner
	}
	model tagged-reasoning {
		to tags sim-reasoner
		reasoning_field reasoning
	}
	model tagged-both {
		to tags sim-reasoner
		reasoning_field both
	}
	model tagged-inline {
		to tags sim-reasoner
		reasoning_field inline
	}
	model unopened-reasoning {
		to unopened sim-reasoner
		reasoning_field reasoning
	}
	model unopened-both {
		to unopened sim-reasoner
		reasoning_field both
	}
	model unopened-inline {
		to unopened sim-reasoner
		reasoning_field inline
	}
}`

// taggedTexts is what the tagged simulators write: the reasoning between
// the tags, the answer after them. The relay's reasoning is the
// simulator's followed by the "\n" it writes before </think>: the newlines
// after a tag are formatting and dropped, the one before </think> stays
// in the reasoning (see internal/thinktag's doc, "Newlines next to the
// tags").
func taggedTexts(t *testing.T) (simReasoning, wantReasoning, answer string) {
	t.Helper()
	r, c := 24, 16
	rs, cs := sim.Texts(sim.Config{Seed: 27, ReasoningTokens: &r, ContentTokens: &c})
	simReasoning, answer = strings.Join(rs, ""), strings.Join(cs, "")
	// The newlines right after a tag are dropped: a text that began with
	// one would not come back as sent, and the test would say nothing.
	if simReasoning == "" || answer == "" || strings.ContainsAny(simReasoning[:1]+answer[:1], "\r\n") {
		t.Fatalf("seed 27 gives reasoning %q and answer %q: pick a seed whose texts are not empty and begin with no newline", simReasoning, answer)
	}
	if hasTag(simReasoning) || hasTag(answer) {
		t.Fatalf("the simulator's texts hold a tag themselves: %q %q", simReasoning, answer)
	}
	return simReasoning, simReasoning + "\n", answer
}

// hasTag reports whether s holds any part of a think tag a client must
// not see in its answer.
func hasTag(s string) bool {
	return strings.Contains(s, "<think") || strings.Contains(s, "think>")
}

// chatSeen is what a Chat Completions client read: each reasoning name's
// text (and whether it was there at all), the content, the finish reason.
type chatSeen struct {
	reasoningContent, reasoning string
	hasRC, hasR                 bool
	content                     string
	finish                      string
	chunks                      int
}

// extraString appends to dst the string of field name in extra fields, and
// reports whether the field was there with a non-null value.
func extraString(t *testing.T, fields map[string]respjson.Field, name string, dst *string) bool {
	t.Helper()
	f, ok := fields[name]
	if !ok || f.Raw() == "" || f.Raw() == "null" {
		return false
	}
	var s string
	if err := json.Unmarshal([]byte(f.Raw()), &s); err != nil {
		t.Fatalf("%s %q: %v", name, f.Raw(), err)
	}
	*dst += s
	return true
}

// chatGo asks model once with openai-go, streaming or not, with opts.
func chatGo(t *testing.T, model string, stream bool, opts ...option.RequestOption) chatSeen {
	t.Helper()
	client := openaiClient(taggedKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := chatParams(model)
	var got chatSeen
	if !stream {
		res, err := client.Chat.Completions.New(ctx, params, opts...)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if len(res.Choices) != 1 {
			t.Fatalf("%s: %d choices", model, len(res.Choices))
		}
		m := res.Choices[0].Message
		ex := m.JSON.ExtraFields
		got.hasRC = extraString(t, ex, "reasoning_content", &got.reasoningContent)
		got.hasR = extraString(t, ex, "reasoning", &got.reasoning)
		got.content, got.finish = m.Content, res.Choices[0].FinishReason
		return got
	}
	s := client.Chat.Completions.NewStreaming(ctx, params, opts...)
	defer s.Close()
	for s.Next() {
		got.chunks++
		for _, c := range s.Current().Choices {
			ex := c.Delta.JSON.ExtraFields
			if extraString(t, ex, "reasoning_content", &got.reasoningContent) {
				got.hasRC = true
			}
			if extraString(t, ex, "reasoning", &got.reasoning) {
				got.hasR = true
			}
			got.content += c.Delta.Content
			if c.FinishReason != "" {
				got.finish = c.FinishReason
			}
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("%s stream: %v after %d chunks", model, err, got.chunks)
	}
	return got
}

// TestInlineReasoningOpenAIGoChat: openai-go, streaming and not, reads a
// tagged model's reasoning where reasoning_field puts it and the answer
// alone in content, for both forms (Qwen3's tags and DeepSeek-R1's with
// no opening tag) set on the upstream or on the target, and for a form
// the client's header picks on an auto upstream.
func TestInlineReasoningOpenAIGoChat(t *testing.T) {
	startRelay(t, taggedRelay, taggedSimSite)
	simReasoning, wantR, answer := taggedTexts(t)

	// What the simulator sends, read as fields: the tags in content. The
	// rest of the test is about their going.
	for _, stream := range []bool{false, true} {
		got := chatGo(t, "untreated", stream)
		if want := sim.TaggedContent(sim.ReasoningTags, simReasoning, answer); got.content != want || got.hasRC || got.hasR {
			t.Fatalf("untreated (stream %v): content %q (reasoning %v %v); want the simulator's tagged content %q", stream, got.content, got.hasRC, got.hasR, want)
		}
	}

	header := option.WithHeader(sim.ReasoningFormHeader, sim.ReasoningTags)
	for _, tc := range []struct {
		model, field string
		opts         []option.RequestOption
	}{
		{"tagged", "", nil},
		{"unopened", "", nil},
		{"per-target", "", nil},
		{"per-target-unopened", "", nil},
		{"via-header", "", []option.RequestOption{header}},
		{"tagged-reasoning", "reasoning", nil},
		{"unopened-reasoning", "reasoning", nil},
		{"tagged-both", "both", nil},
		{"unopened-both", "both", nil},
		{"tagged-inline", "inline", nil},
		{"unopened-inline", "inline", nil},
	} {
		t.Run(tc.model, func(t *testing.T) {
			// Three streams: each cuts the tags at other places.
			for i, stream := range []bool{false, true, true, true} {
				got := chatGo(t, tc.model, stream, tc.opts...)
				what := map[bool]string{false: "New", true: "NewStreaming"}[stream]
				if i > 1 {
					what += " again"
				}
				if got.finish != "stop" {
					t.Errorf("%s: finish_reason %q", what, got.finish)
				}
				if stream && got.chunks < 16 {
					t.Errorf("%s: %d chunks; want the stream delta by delta", what, got.chunks)
				}
				switch tc.field {
				case "inline":
					// reasoning_field inline writes the reasoning back into
					// content between its own tags (chat.Inliner): "<think>\n",
					// the reasoning (which keeps the "\n" it had before
					// </think>, so no other is added), "</think>\n\n", the
					// answer.
					want := "<think>\n" + wantR + "</think>\n\n" + answer
					if got.content != want || got.hasRC || got.hasR {
						t.Errorf("%s: content %q, reasoning fields %v %v;\nwant content %q and no reasoning field", what, got.content, got.hasRC, got.hasR, want)
					}
					continue
				case "":
					if !got.hasRC || got.reasoningContent != wantR || got.hasR {
						t.Errorf("%s: reasoning_content %q (there: %v), reasoning there: %v;\nwant reasoning_content %q alone", what, got.reasoningContent, got.hasRC, got.hasR, wantR)
					}
				case "reasoning":
					if !got.hasR || got.reasoning != wantR || got.hasRC {
						t.Errorf("%s: reasoning %q (there: %v), reasoning_content there: %v;\nwant reasoning %q alone", what, got.reasoning, got.hasR, got.hasRC, wantR)
					}
				case "both":
					if got.reasoning != wantR || got.reasoningContent != wantR {
						t.Errorf("%s: reasoning %q, reasoning_content %q; want both %q", what, got.reasoning, got.reasoningContent, wantR)
					}
				}
				if got.content != answer || hasTag(got.content) {
					t.Errorf("%s: content %q;\nwant the answer alone %q", what, got.content, answer)
				}
			}
		})
	}

	// The auto upstream with no header: the simulator's own fields pass.
	got := chatGo(t, "via-header", true)
	if got.reasoningContent != simReasoning || got.content != answer {
		t.Errorf("auto upstream, reasoning in fields: reasoning_content %q content %q; want %q and %q", got.reasoningContent, got.content, simReasoning, answer)
	}
}

// TestInlineReasoningAnthropicSDKGo: anthropic-sdk-go on /v1/messages,
// in front of the tagged Chat simulators, gets one thinking block with the
// reasoning and one text block with the answer, streaming (the SDK's
// accumulator) and not.
func TestInlineReasoningAnthropicSDKGo(t *testing.T) {
	startRelay(t, taggedRelay, taggedSimSite)
	_, wantR, answer := taggedTexts(t)
	relay := anthropicClient(relayBase, taggedKey)
	for _, model := range []string{"tagged", "unopened", "per-target-unopened"} {
		for i, stream := range []bool{false, true, true} {
			what := model + map[bool]string{false: " New", true: " NewStreaming"}[stream]
			if i > 1 {
				what += " again"
			}
			m, err := sendMessage(relay, stream, withThinking(userParams(model)))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			var types []string
			for _, b := range m.Content {
				types = append(types, string(b.Type))
			}
			if strings.Join(types, ",") != "thinking,text" {
				t.Errorf("%s: blocks %v; want one thinking block, then one text block", what, types)
				continue
			}
			if th := m.Content[0].Thinking; th != wantR {
				t.Errorf("%s: thinking %q;\nwant %q", what, th, wantR)
			}
			if tx := m.Content[1].Text; tx != answer || hasTag(tx) {
				t.Errorf("%s: text %q;\nwant the answer alone %q", what, tx, answer)
			}
			if m.StopReason != anthropic.StopReasonEndTurn {
				t.Errorf("%s: stop_reason %q", what, m.StopReason)
			}
		}
	}
}

// responsesSeen is what openai-go's Responses read: the reasoning items'
// summary text and the answer, from the response and (streaming) from the
// delta events.
type responsesSeen struct {
	items                    []string // output item types
	summary, text            string
	eventSummary, eventText  string
	summaryDeltas, textDelta int
}

func responsesOutput(r *responses.Response) (items []string, summary, text string) {
	for _, it := range r.Output {
		items = append(items, it.Type)
		switch it.Type {
		case "reasoning":
			for _, s := range it.AsReasoning().Summary {
				summary += s.Text
			}
		case "message":
			for _, c := range it.AsMessage().Content {
				text += c.Text
			}
		}
	}
	return items, summary, text
}

func responsesGo(t *testing.T, model string, stream bool) responsesSeen {
	t.Helper()
	client := openai.NewClient(option.WithBaseURL(relayBase+"/v1"), option.WithAPIKey(taggedKey), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := responses.ResponseNewParams{
		Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	}
	var got responsesSeen
	if !stream {
		r, err := client.Responses.New(ctx, params)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		got.items, got.summary, got.text = responsesOutput(r)
		if r.OutputText() != got.text {
			t.Errorf("%s: output_text %q, the message's text %q", model, r.OutputText(), got.text)
		}
		return got
	}
	s := client.Responses.NewStreaming(ctx, params)
	defer s.Close()
	completed := false
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.reasoning_summary_text.delta":
			got.eventSummary += ev.Delta
			got.summaryDeltas++
		case "response.output_text.delta":
			got.eventText += ev.Delta
			got.textDelta++
		case "response.completed":
			completed = true
			r := ev.Response
			got.items, got.summary, got.text = responsesOutput(&r)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("%s stream: %v", model, err)
	}
	if !completed {
		t.Fatalf("%s stream: no response.completed", model)
	}
	return got
}

// TestInlineReasoningResponsesGo: openai-go on /v1/responses, in front of
// the tagged Chat simulators, gets a reasoning item whose summary text is
// the reasoning, then a message with the answer; streaming, the summary
// and text delta events carry the same texts.
func TestInlineReasoningResponsesGo(t *testing.T) {
	startRelay(t, taggedRelay, taggedSimSite)
	_, wantR, answer := taggedTexts(t)
	for _, model := range []string{"tagged", "unopened", "per-target"} {
		for i, stream := range []bool{false, true, true} {
			what := model + map[bool]string{false: " New", true: " NewStreaming"}[stream]
			if i > 1 {
				what += " again"
			}
			got := responsesGo(t, model, stream)
			if strings.Join(got.items, ",") != "reasoning,message" {
				t.Errorf("%s: output items %v; want a reasoning item, then a message", what, got.items)
			}
			if got.summary != wantR {
				t.Errorf("%s: reasoning summary %q;\nwant %q", what, got.summary, wantR)
			}
			if got.text != answer || hasTag(got.text) {
				t.Errorf("%s: message text %q;\nwant the answer alone %q", what, got.text, answer)
			}
			if stream && (got.eventSummary != wantR || got.eventText != answer || got.summaryDeltas < 2 || got.textDelta < 2) {
				t.Errorf("%s: events: summary deltas %q (%d), text deltas %q (%d);\nwant %q and %q, delta by delta", what, got.eventSummary, got.summaryDeltas, got.eventText, got.textDelta, wantR, answer)
			}
		}
	}
}

// TestInlineReasoningAutoPassesMentions: with `reasoning_format auto`, an
// answer that mentions <think> and </think> after its first word is
// answer text, passed byte for byte (mode off: the stream as the upstream
// wrote it; not streaming: the body), with a tag cut across deltas; the
// same upstream's answer that begins with a block has it moved into
// reasoning_content.
func TestInlineReasoningAutoPassesMentions(t *testing.T) {
	const mention = "To hide reasoning, wrap it in <think> and </think>: the model's <think> block is then cut out."
	// Deltas cut inside both tags.
	mentionDeltas := []string{"To hide reasoning, wrap it in <th", "ink> and </", "think>: the model's <think", "> block is then cut out."}
	blockDeltas := []string{"\n<thi", "nk>\nfirst, ", "think\n</th", "ink>\n\n", "Then answer."}
	finish := `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	streamBody := func(deltas []string) string {
		var b strings.Builder
		for _, d := range deltas {
			b.WriteString("data: " + chunk(d) + "\n\n")
		}
		b.WriteString("data: " + finish + "\n\ndata: [DONE]\n\n")
		return b.String()
	}
	whole := func(content string) string {
		c, _ := json.Marshal(content)
		return `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` + string(c) + `},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":9,"total_tokens":10}}`
	}
	// The test's headers (forwarded as the client's) pick the answer and
	// its form.
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		deltas, text := mentionDeltas, mention
		if r.Header.Get("X-Test-Answer") == "block" {
			deltas, text = blockDeltas, strings.Join(blockDeltas, "")
		}
		if r.Header.Get("X-Test-Stream") == "1" {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, streamBody(deltas))
			return
		}
		answerJSON(w, 200, whole(text))
	})
	startRelay(t, `llm_relay {
		upstream local `+up.v1()+` {
			api chat
			reasoning_format auto
		}
		model m {
			to local
		}
	}`)

	// Byte for byte: the stream in mode off, and the whole answer.
	resp := post(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "X-Relay-Mode", "off", "X-Test-Stream", "1")
	if got, want := readAll(t, resp), streamBody(mentionDeltas); resp.StatusCode != 200 || got != want {
		t.Errorf("mode off stream: status %d\n got %q\nwant %q (the upstream's bytes)", resp.StatusCode, got, want)
	}
	resp = post(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if got, want := readAll(t, resp), whole(mention); resp.StatusCode != 200 || got != want {
		t.Errorf("whole answer: status %d\n got %s\nwant %s (the upstream's bytes)", resp.StatusCode, got, want)
	}
	// The default mode re-paces, and the text is still the upstream's.
	got := chatGo(t, "m", true, option.WithHeader("X-Test-Stream", "1"))
	if got.content != mention || got.hasRC || got.hasR {
		t.Errorf("default mode stream: content %q, reasoning %v %v; want %q and no reasoning", got.content, got.hasRC, got.hasR, mention)
	}

	// The same upstream, an answer that begins with a block (after a
	// newline): split, stream and not.
	for _, stream := range []bool{false, true} {
		opts := []option.RequestOption{option.WithHeader("X-Test-Answer", "block")}
		if stream {
			opts = append(opts, option.WithHeader("X-Test-Stream", "1"))
		}
		got := chatGo(t, "m", stream, opts...)
		if got.reasoningContent != "first, think\n" || got.content != "\nThen answer." {
			t.Errorf("stream %v: reasoning_content %q content %q; want %q and %q", stream, got.reasoningContent, got.content, "first, think\n", "\nThen answer.")
		}
	}
}

// TestInlineReasoningTargetOverridesUpstream: a target's own reasoning
// lines decide for its model over its upstream's, as one server may serve
// a tagged model and a parsed one. `reasoning_format fields` on a target
// of an upstream whose models start in reasoning leaves that target's
// content alone (and the upstream's starts_in_reasoning is no error for
// it); `starts_in_reasoning` on a target of an upstream set to fields
// reads that target's content for tags.
func TestInlineReasoningTargetOverridesUpstream(t *testing.T) {
	startRelay(t, `llm_relay {
		key `+taggedKey+`
		upstream r1 http://127.0.0.1:9085/fields/v1 {
			api chat
			starts_in_reasoning
		}
		upstream parsed http://127.0.0.1:9085/unopened/v1 {
			api chat
			reasoning_format fields
		}
		model r1 {
			to r1 sim-reasoner
		}
		model fields-over-tagged {
			to r1 sim-reasoner {
				reasoning_format fields
			}
		}
		model tags-over-fields {
			to parsed sim-reasoner {
				starts_in_reasoning
			}
		}
	}`, taggedSimSite)
	simReasoning, wantR, answer := taggedTexts(t)
	unopened := option.WithHeader(sim.ReasoningFormHeader, sim.ReasoningTagsUnopened)
	for _, stream := range []bool{false, true} {
		for _, tc := range []struct {
			model       string
			opts        []option.RequestOption
			reasoning   string
			whatItMeans string
		}{
			{"r1", []option.RequestOption{unopened}, wantR, "the upstream's starts_in_reasoning"},
			{"fields-over-tagged", nil, simReasoning, "the target's fields: the simulator's reasoning_content as sent"},
			{"tags-over-fields", nil, wantR, "the target's starts_in_reasoning"},
		} {
			got := chatGo(t, tc.model, stream, tc.opts...)
			if got.reasoningContent != tc.reasoning || got.content != answer {
				t.Errorf("%s (stream %v): reasoning_content %q content %q;\nwant %q and %q (%s)", tc.model, stream, got.reasoningContent, got.content, tc.reasoning, answer, tc.whatItMeans)
			}
		}
	}
}
