package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/handoff"
)

// got is what a client took from an answer of any dialect, streamed or
// not, complete or cut.
type got struct {
	reasoning, text string
	name, args      string   // the tool call's
	types           []string // stream event types in order (Chat: role, reasoning, content, tool, finish, usage, [DONE], error)
	textDeltas      int      // answer text deltas of a stream
	tokens          int      // output tokens the usage counts, when it came
	err             error    // a stream's read error: a dropped connection
}

// last is the type of the stream's last event.
func (g got) last() string {
	if len(g.types) == 0 {
		return ""
	}
	return g.types[len(g.types)-1]
}

// postDialect sends body to d's endpoint.
func postDialect(t *testing.T, base string, client *http.Client, d handoff.Dialect, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+echoPaths[d], strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// chatWire is a chat chunk or completion, decoded loosely.
type chatWire struct {
	Choices []struct {
		Delta, Message struct {
			Role             *string `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			ToolCalls        []struct {
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		}
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// readGot reads an answer of dialect d.
func readGot(t *testing.T, d handoff.Dialect, stream bool, resp *http.Response) got {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var g got
	switch {
	case d == handoff.Chat && stream:
		events, err := readEvents(resp.Body)
		g.err = err
		var r, c strings.Builder
		for _, ev := range events {
			switch {
			case ev.data == "[DONE]":
				g.types = append(g.types, "[DONE]")
				continue
			case strings.HasPrefix(ev.data, `{"error"`):
				g.types = append(g.types, "error")
				continue
			}
			var w chatWire
			if err := json.Unmarshal([]byte(ev.data), &w); err != nil {
				t.Fatalf("chunk %s: %v", ev.data, err)
			}
			if w.Usage != nil {
				g.tokens = w.Usage.CompletionTokens
			}
			if len(w.Choices) == 0 {
				g.types = append(g.types, "usage")
				continue
			}
			ch := w.Choices[0]
			dl := ch.Delta
			switch {
			case ch.FinishReason != nil:
				g.types = append(g.types, "finish")
			case dl.Role != nil:
				g.types = append(g.types, "role")
			case dl.ReasoningContent != nil:
				g.types = append(g.types, "reasoning")
				r.WriteString(*dl.ReasoningContent)
			case len(dl.ToolCalls) > 0:
				g.types = append(g.types, "tool")
				g.name += dl.ToolCalls[0].Function.Name
				g.args += dl.ToolCalls[0].Function.Arguments
			case dl.Content != nil:
				g.types = append(g.types, "content")
				c.WriteString(*dl.Content)
				g.textDeltas++
			}
		}
		g.reasoning, g.text = r.String(), c.String()
	case d == handoff.Chat:
		var w chatWire
		if err := json.NewDecoder(resp.Body).Decode(&w); err != nil || len(w.Choices) != 1 {
			t.Fatalf("%v: %+v", err, w)
		}
		m := w.Choices[0].Message
		if m.ReasoningContent != nil {
			g.reasoning = *m.ReasoningContent
		}
		if m.Content != nil {
			g.text = *m.Content
		}
		for _, tc := range m.ToolCalls {
			g.name, g.args = tc.Function.Name, tc.Function.Arguments
		}
		g.tokens = w.Usage.CompletionTokens
	case d == handoff.Messages && stream:
		events, err := readMsgEvents(t, resp.Body)
		g.err = err
		r := reassemble(t, events)
		g.reasoning, g.text, g.args, g.types, g.tokens = r.thinking, r.text, r.json, r.types, int(r.outputTokens)
		for _, b := range r.blocks {
			if b["type"] == "tool_use" {
				g.name = b["name"].(string)
			}
		}
		for _, ev := range events {
			if ev.typ == "content_block_delta" && ev.data["delta"].(map[string]any)["type"] == "text_delta" {
				g.textDeltas++
			}
		}
	case d == handoff.Messages:
		m := decodeMsg(t, resp)
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				g.text += *b.Text
			case "thinking":
				g.reasoning += *b.Thinking
			case "tool_use":
				g.name, g.args = b.Name, string(b.Input)
			}
		}
		g.tokens = m.Usage["output_tokens"]
	case stream:
		events, err := readRespEvents(t, resp.Body)
		g.err = err
		r := reassembleResp(t, events)
		g.reasoning, g.text, g.args, g.types = r.summary, r.text, r.args, r.types
		for _, ev := range events {
			switch ev.typ {
			case "response.output_text.delta":
				g.textDeltas++
			case "response.output_item.added":
				if it := ev.data["item"].(map[string]any); it["type"] == "function_call" {
					g.name = it["name"].(string)
				}
			}
		}
		if r.completed != nil {
			g.tokens = int(r.completed["usage"].(map[string]any)["output_tokens"].(float64))
		}
	default:
		o := decodeRespObj(t, resp)
		for _, it := range o.Output {
			switch it.Type {
			case "message":
				for _, c := range it.Content {
					g.text += c.Text
				}
			case "reasoning":
				for _, s := range it.Summary {
					g.reasoning += s.Text
				}
			case "function_call":
				g.name, g.args = it.Name, it.Arguments
			}
		}
		g.tokens = o.Usage.OutputTokens
	}
	return g
}

// convo builds a request body of dialect d: one user turn, then the
// answer so far as an assistant turn when prefix is not nil (with
// extra members on it, e.g. `"prefix":true`), then the continue
// instruction when instruct. The request asks for reasoning and, with
// tools, forces a call of tool "lookup".
type convo struct {
	stream   bool
	prefix   *string
	onPrefix string // extra members of the assistant turn, e.g. `,"prefix":true`
	instruct bool
	tools    bool
	top      string // extra top-level members, e.g. `,"continue_final_message":true`
}

const continueInstruction = ContinueMarker + ". Continue exactly where it stopped, without repeating anything."

func (c convo) body(d handoff.Dialect) string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	var turns []string
	user := `{"role":"user","content":"tell me about relays"}`
	turns = append(turns, user)
	if c.prefix != nil {
		if d == handoff.Responses {
			turns = append(turns, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":`+q(*c.prefix)+`}]`+c.onPrefix+`}`)
		} else {
			turns = append(turns, `{"role":"assistant","content":`+q(*c.prefix)+c.onPrefix+`}`)
		}
	}
	if c.instruct {
		turns = append(turns, `{"role":"user","content":`+q(continueInstruction)+`}`)
	}
	list := "[" + strings.Join(turns, ",") + "]"
	head := fmt.Sprintf(`{"model":"sim","stream":%v`, c.stream)
	switch d {
	case handoff.Chat:
		head += `,"stream_options":{"include_usage":true},"messages":` + list
		if c.tools {
			head += `,"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}],"tool_choice":"required"`
		}
	case handoff.Messages:
		head += `,"max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":` + list
		if c.tools {
			head += `,"tools":[{"name":"lookup","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}`
		}
	case handoff.Responses:
		head += `,"reasoning":{"effort":"high","summary":"auto"},"input":` + list
		if c.tools {
			head += `,"tools":[{"type":"function","name":"lookup","parameters":{"type":"object"}}],"tool_choice":"required"`
		}
	}
	return head + c.top + "}"
}

var dialects = []handoff.Dialect{handoff.Chat, handoff.Messages, handoff.Responses}
