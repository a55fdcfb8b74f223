package llmrelay_test

// Reassemblers for the recorded-stream corpus (recordings_e2e_test.go):
// one per dialect, written here from the wire formats and sharing nothing
// with the relay's translators, so that a translator's mistake cannot
// hide in the yardstick. Each reads a stream (SSE) or a whole answer
// (JSON) of its dialect into a turn: what the answer says (text,
// reasoning, refusal, tool calls, stop reason), whether it ended as its
// dialect ends a complete answer, and any error it carried. The same code
// reads a recording (what the upstream said) and the relay's answer (what
// the client got), so the expected values come from the recording itself.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// toolCall is one client tool call: its id, its name and its arguments
// as the JSON text they add up to.
type toolCall struct {
	ID, Name, Args string
}

// turn is what one answer says, in any dialect.
type turn struct {
	Text, Reasoning, Refusal string
	// Model is the model the answer names (Chat: the first chunk that
	// names one; Messages: message_start; Responses: response.created,
	// or the final response object).
	Model string
	Calls []toolCall
	// Stop is the dialect's own word for how the answer ended: Chat's
	// finish_reason, Messages' stop_reason, a Responses status (with
	// ":reason" when incomplete).
	Stop string
	// Choices counts the Chat choice indexes seen (1 in other dialects).
	Choices int
	// Done: the stream ended with its dialect's terminator ([DONE],
	// message_stop, response.completed or .incomplete), or a JSON answer
	// is a 2xx response object.
	Done bool
	// Err is an in-band error or an error answer's message ("" for none).
	Err string
	// Detail is everything else a native replay must keep (signatures,
	// redacted thinking, server tool blocks, usage chunks, the final
	// response object), normalised so that whitespace does not count.
	Detail any
}

// sseEvent is one SSE block: its event name and its data lines joined.
type sseEvent struct {
	name, data string
	hasData    bool
}

// parseSSE splits a stream into its events, as the SSE spec reads them:
// blocks end at a blank line, lines end at LF, CRLF or CR, comments
// (":…") are skipped, one space after the colon is dropped.
func parseSSE(body []byte) []sseEvent {
	s := strings.ReplaceAll(strings.ReplaceAll(string(body), "\r\n", "\n"), "\r", "\n")
	var out []sseEvent
	var cur sseEvent
	var data []string
	flush := func() {
		if cur.hasData {
			cur.data = strings.Join(data, "\n")
			out = append(out, cur)
		}
		cur, data = sseEvent{}, nil
	}
	for _, line := range strings.Split(s, "\n") {
		if line == "" {
			flush()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			cur.name = value
		case "data":
			cur.hasData = true
			data = append(data, value)
		}
	}
	flush() // an unterminated last block still counts (the relay ends every event)
	return out
}

// norm decodes JSON into plain Go values, so that two encodings of the
// same value compare equal; text that is not JSON stays a string.
func norm(raw []byte) any {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "not JSON: " + string(raw)
	}
	return v
}

// jsonEqual reports whether a and b are both JSON and the same value.
func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return deepEqualJSON(x, y)
}

func deepEqualJSON(x, y any) bool {
	bx, _ := json.Marshal(x) // encoding/json sorts map keys
	by, _ := json.Marshal(y)
	return bytes.Equal(bx, by)
}

// errorMessage reads an error object's message from the shapes the
// dialects use: {"error":{"message"}}, {"type":"error","error":{…}},
// {"message"}; a bare error string is its own message.
func errorMessage(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return orUnnamed(s)
	}
	var e struct {
		Message string          `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	if e.Message != "" {
		return e.Message
	}
	if len(e.Error) > 0 && string(e.Error) != "null" {
		return errorMessage(e.Error)
	}
	return orUnnamed("")
}

func orUnnamed(s string) string {
	if s == "" {
		return "(an error with no message)"
	}
	return s
}

// ---- Chat Completions ----

// chatContent reads a Chat content member: a string, null, or (Mistral's
// reasoning models) an array of parts: text, thinking (whose "thinking"
// is a string or an array of text parts), refusal.
func chatContent(raw json.RawMessage) (text, reasoning, refusal string) {
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, "", ""
	}
	var parts []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		Refusal  string          `json:"refusal"`
		Thinking json.RawMessage `json:"thinking"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", "", ""
	}
	for _, p := range parts {
		switch p.Type {
		case "text":
			text += p.Text
		case "refusal":
			refusal += p.Refusal
		case "thinking":
			t, _, _ := chatContent(p.Thinking)
			reasoning += t
		}
	}
	return
}

// chatDelta is the part of a Chat message or delta the reassembler reads.
type chatDelta struct {
	Content          json.RawMessage `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
	Refusal          *string         `json:"refusal"`
	ToolCalls        []struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// chatChoice accumulates one choice as the OpenAI SDKs do: text appended,
// tool calls accumulated by index.
type chatChoice struct {
	text, refusal strings.Builder
	reasoning     map[string]*strings.Builder // by the field that carried it
	calls         map[int]*toolCall
	order         []int
	lastIndex     int
	finish        string
}

func (c *chatChoice) add(d *chatDelta) {
	text, reasoning, refusal := chatContent(d.Content)
	c.text.WriteString(text)
	c.refusal.WriteString(refusal)
	c.addReasoning("content", reasoning)
	if d.ReasoningContent != nil {
		c.addReasoning("reasoning_content", *d.ReasoningContent)
	}
	if d.Reasoning != nil {
		c.addReasoning("reasoning", *d.Reasoning)
	}
	if d.Refusal != nil {
		c.refusal.WriteString(*d.Refusal)
	}
	for _, tc := range d.ToolCalls {
		// Mistral leaves "index" out: a new id is a new call, anything
		// else belongs to the last one.
		idx := c.lastIndex
		if tc.Index != nil {
			idx = *tc.Index
		} else if last := c.calls[c.lastIndex]; last == nil || tc.ID != "" && tc.ID != last.ID {
			idx = len(c.order)
		}
		call := c.calls[idx]
		if call == nil {
			if c.calls == nil {
				c.calls = map[int]*toolCall{}
			}
			call = &toolCall{}
			c.calls[idx] = call
			c.order = append(c.order, idx)
		}
		c.lastIndex = idx
		if call.ID == "" {
			call.ID = tc.ID
		}
		call.Name += tc.Function.Name
		call.Args += tc.Function.Arguments
	}
}

func (c *chatChoice) addReasoning(field, s string) {
	if s == "" {
		return
	}
	if c.reasoning == nil {
		c.reasoning = map[string]*strings.Builder{}
	}
	if c.reasoning[field] == nil {
		c.reasoning[field] = &strings.Builder{}
	}
	c.reasoning[field].WriteString(s)
}

func (c *chatChoice) turn() turn {
	t := turn{Text: c.text.String(), Refusal: c.refusal.String(), Stop: c.finish}
	fields := make([]string, 0, len(c.reasoning))
	for f := range c.reasoning {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	for _, f := range fields {
		t.Reasoning += c.reasoning[f].String()
	}
	idx := append([]int(nil), c.order...)
	sort.Ints(idx)
	for _, i := range idx {
		t.Calls = append(t.Calls, *c.calls[i])
	}
	return t
}

// chatDetail is a Chat answer whole: every choice, reasoning by field
// name, and the chunks that carry no choice (usage, filter results).
type chatDetail struct {
	Choices map[int]any
	Extra   []any
}

// chatStreamTurn reassembles a Chat Completions stream.
func chatStreamTurn(body []byte) turn {
	choices := map[int]*chatChoice{}
	var t turn
	detail := chatDetail{Choices: map[int]any{}}
	for _, ev := range parseSSE(body) {
		if ev.data == "[DONE]" {
			t.Done = true
			continue
		}
		var c struct {
			Model   string          `json:"model"`
			Error   json.RawMessage `json:"error"`
			Choices []struct {
				Index        int       `json:"index"`
				Delta        chatDelta `json:"delta"`
				FinishReason *string   `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			t.Err = "unreadable chunk: " + ev.data
			continue
		}
		if t.Model == "" {
			t.Model = c.Model
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			t.Err = errorMessage(c.Error)
			continue
		}
		if len(c.Choices) == 0 {
			detail.Extra = append(detail.Extra, norm([]byte(ev.data)))
		}
		for _, ch := range c.Choices {
			acc := choices[ch.Index]
			if acc == nil {
				acc = &chatChoice{}
				choices[ch.Index] = acc
			}
			acc.add(&ch.Delta)
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				acc.finish = *ch.FinishReason
			}
		}
	}
	for i, acc := range choices {
		ct := acc.turn()
		detail.Choices[i] = map[string]any{"turn": ct, "reasoning_fields": reasoningFields(acc)}
	}
	if first := choices[0]; first != nil {
		ft := first.turn()
		t.Text, t.Reasoning, t.Refusal, t.Calls, t.Stop = ft.Text, ft.Reasoning, ft.Refusal, ft.Calls, ft.Stop
	}
	t.Choices = len(choices)
	t.Detail = detail
	return t
}

func reasoningFields(c *chatChoice) map[string]string {
	out := map[string]string{}
	for f, b := range c.reasoning {
		out[f] = b.String()
	}
	return out
}

// chatJSONTurn reads a whole chat.completion (or an error body).
func chatJSONTurn(body []byte) turn {
	var r struct {
		Model   string          `json:"model"`
		Error   json.RawMessage `json:"error"`
		Choices []struct {
			Index        int       `json:"index"`
			Message      chatDelta `json:"message"`
			FinishReason *string   `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return turn{Err: "unreadable answer: " + string(body)}
	}
	if len(r.Error) > 0 && string(r.Error) != "null" {
		return turn{Err: errorMessage(r.Error)}
	}
	t := turn{Done: true, Model: r.Model, Choices: len(r.Choices), Detail: norm(body)}
	for _, ch := range r.Choices {
		if ch.Index != 0 {
			continue
		}
		var acc chatChoice
		acc.add(&ch.Message)
		if ch.FinishReason != nil {
			acc.finish = *ch.FinishReason
		}
		ft := acc.turn()
		t.Text, t.Reasoning, t.Refusal, t.Calls, t.Stop = ft.Text, ft.Reasoning, ft.Refusal, ft.Calls, ft.Stop
	}
	return t
}

// ---- Anthropic Messages ----

// msgBlock is one content block as the Anthropic SDKs accumulate it.
type msgBlock struct {
	Type      string
	Start     any    // the content_block of content_block_start, whole
	Text      string // text: the start's text and every text_delta
	Thinking  string
	Signature string
	JSON      string // input_json_delta fragments joined
	Citations []any
	Other     []any // deltas of other types, whole
	Stopped   bool
}

// msgDetail is a Messages answer whole.
type msgDetail struct {
	Start  any
	Blocks []*msgBlock
	Stop   any // message_delta's delta
	Usage  any
}

func (b *msgBlock) call() (toolCall, bool) {
	if b.Type != "tool_use" {
		return toolCall{}, false // server_tool_use, mcp_tool_use: the provider ran them
	}
	var start struct {
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	raw, _ := json.Marshal(b.Start)
	_ = json.Unmarshal(raw, &start)
	args := b.JSON
	if args == "" {
		// No input_json_delta: the input is the start's (as the SDKs
		// read it), {} for a tool without arguments.
		args = string(start.Input)
		if args == "" || args == "null" {
			args = "{}"
		}
	}
	return toolCall{ID: start.ID, Name: start.Name, Args: args}, true
}

func msgTurnOf(blocks []*msgBlock) turn {
	var t turn
	for _, b := range blocks {
		switch b.Type {
		case "text":
			t.Text += b.Text
		case "thinking":
			t.Reasoning += b.Thinking
		}
		if c, ok := b.call(); ok {
			t.Calls = append(t.Calls, c)
		}
	}
	t.Choices = 1
	return t
}

// messagesStreamTurn reassembles a Messages stream.
func messagesStreamTurn(body []byte) turn {
	var d msgDetail
	byIndex := map[int]*msgBlock{}
	var stop, errMsg, model string
	done := false
	for _, ev := range parseSSE(body) {
		var e struct {
			Type         string          `json:"type"`
			Index        int             `json:"index"`
			Message      json.RawMessage `json:"message"`
			ContentBlock json.RawMessage `json:"content_block"`
			Delta        json.RawMessage `json:"delta"`
			Usage        json.RawMessage `json:"usage"`
			Error        json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			errMsg = "unreadable event: " + ev.data
			continue
		}
		if ev.name == "error" || e.Type == "error" {
			errMsg = errorMessage([]byte(ev.data))
			continue
		}
		switch e.Type {
		case "message_start":
			d.Start = norm(e.Message)
			var m struct {
				Model string `json:"model"`
			}
			_ = json.Unmarshal(e.Message, &m)
			model = m.Model
		case "content_block_start":
			var cb struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				Thinking string `json:"thinking"`
			}
			_ = json.Unmarshal(e.ContentBlock, &cb)
			b := &msgBlock{Type: cb.Type, Start: norm(e.ContentBlock), Text: cb.Text, Thinking: cb.Thinking}
			byIndex[e.Index] = b
			d.Blocks = append(d.Blocks, b)
		case "content_block_delta":
			b := byIndex[e.Index]
			if b == nil {
				errMsg = fmt.Sprintf("delta for block %d, which never started", e.Index)
				continue
			}
			var dl struct {
				Type        string          `json:"type"`
				Text        string          `json:"text"`
				Thinking    string          `json:"thinking"`
				Signature   string          `json:"signature"`
				PartialJSON string          `json:"partial_json"`
				Citation    json.RawMessage `json:"citation"`
			}
			_ = json.Unmarshal(e.Delta, &dl)
			switch dl.Type {
			case "text_delta":
				b.Text += dl.Text
			case "thinking_delta":
				b.Thinking += dl.Thinking
			case "signature_delta":
				b.Signature += dl.Signature
			case "input_json_delta":
				b.JSON += dl.PartialJSON
			case "citations_delta":
				b.Citations = append(b.Citations, norm(dl.Citation))
			default:
				b.Other = append(b.Other, norm(e.Delta))
			}
		case "content_block_stop":
			if b := byIndex[e.Index]; b != nil {
				b.Stopped = true
			}
		case "message_delta":
			var dl struct {
				StopReason string `json:"stop_reason"`
			}
			_ = json.Unmarshal(e.Delta, &dl)
			stop = dl.StopReason
			d.Stop, d.Usage = norm(e.Delta), norm(e.Usage)
		case "message_stop":
			done = true
		}
	}
	t := msgTurnOf(d.Blocks)
	t.Stop, t.Done, t.Err, t.Model, t.Detail = stop, done, errMsg, model, d
	return t
}

// messagesJSONTurn reads a whole Messages answer (or an error body).
func messagesJSONTurn(body []byte) turn {
	var r struct {
		Type       string            `json:"type"`
		Model      string            `json:"model"`
		Error      json.RawMessage   `json:"error"`
		Content    []json.RawMessage `json:"content"`
		StopReason string            `json:"stop_reason"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return turn{Err: "unreadable answer: " + string(body)}
	}
	if r.Type == "error" || len(r.Error) > 0 && string(r.Error) != "null" {
		return turn{Err: errorMessage(body)}
	}
	var blocks []*msgBlock
	for _, c := range r.Content {
		var cb struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			Thinking  string          `json:"thinking"`
			Signature string          `json:"signature"`
			Input     json.RawMessage `json:"input"`
		}
		_ = json.Unmarshal(c, &cb)
		b := &msgBlock{Type: cb.Type, Start: norm(c), Text: cb.Text, Thinking: cb.Thinking, Signature: cb.Signature}
		if cb.Type == "tool_use" && len(cb.Input) > 0 {
			b.JSON = string(cb.Input)
		}
		blocks = append(blocks, b)
	}
	t := msgTurnOf(blocks)
	t.Stop, t.Done, t.Model, t.Detail = r.StopReason, r.Type == "message", r.Model, norm(body)
	return t
}

// ---- OpenAI Responses ----

// responseObject is the part of a Responses response object read here.
type responseObject struct {
	Model             string `json:"model"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error  json.RawMessage `json:"error"`
	Output []struct {
		Type    string `json:"type"`
		CallID  string `json:"call_id"`
		Name    string `json:"name"`
		Args    string `json:"arguments"`
		Content []struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Refusal string `json:"refusal"`
		} `json:"content"`
		Summary []struct {
			Text string `json:"text"`
		} `json:"summary"`
	} `json:"output"`
}

func (r *responseObject) stop() string {
	if r.Status == "incomplete" && r.IncompleteDetails != nil {
		return r.Status + ":" + r.IncompleteDetails.Reason
	}
	return r.Status
}

// turn reads the response object as the SDKs' finalResponse() hands it
// to the application.
func (r *responseObject) turn() turn {
	t := turn{Stop: r.stop(), Model: r.Model, Choices: 1}
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			for _, p := range it.Content {
				switch p.Type {
				case "output_text":
					t.Text += p.Text
				case "refusal":
					t.Refusal += p.Refusal
				}
			}
		case "reasoning":
			for _, s := range it.Summary {
				t.Reasoning += s.Text
			}
			for _, p := range it.Content {
				t.Reasoning += p.Text
			}
		case "function_call":
			t.Calls = append(t.Calls, toolCall{ID: it.CallID, Name: it.Name, Args: it.Args})
		}
	}
	return t
}

// respStreamTurns is a Responses stream read twice over: from its deltas
// (what a streaming UI shows) and from the final response object (what
// finalResponse() returns). Both must say the same.
type respStreamTurns struct {
	deltas, final turn
}

// responsesDetail is a Responses stream whole, but for the sequence
// numbers a paced stream renumbers.
type responsesDetail struct {
	Final  any
	Items  []any // output_item.done items, in order
	Deltas turn
}

// responsesStreamRead reassembles a Responses stream.
func responsesStreamRead(body []byte) respStreamTurns {
	var t turn
	type call struct {
		toolCall
		done string
	}
	calls := map[int]*call{}
	var order []int
	var final responseObject
	var detail responsesDetail
	haveFinal := false
	for _, ev := range parseSSE(body) {
		var e struct {
			Type        string          `json:"type"`
			OutputIndex int             `json:"output_index"`
			Delta       string          `json:"delta"`
			Item        json.RawMessage `json:"item"`
			Response    json.RawMessage `json:"response"`
			Message     string          `json:"message"`
			Error       json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			t.Err = "unreadable event: " + ev.data
			continue
		}
		switch e.Type {
		case "response.created":
			var created responseObject
			_ = json.Unmarshal(e.Response, &created)
			t.Model = created.Model
		case "response.output_text.delta":
			t.Text += e.Delta
		case "response.refusal.delta":
			t.Refusal += e.Delta
		case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
			t.Reasoning += e.Delta
		case "response.output_item.added":
			var it struct {
				Type   string `json:"type"`
				CallID string `json:"call_id"`
				Name   string `json:"name"`
			}
			_ = json.Unmarshal(e.Item, &it)
			if it.Type == "function_call" {
				calls[e.OutputIndex] = &call{toolCall: toolCall{ID: it.CallID, Name: it.Name}}
				order = append(order, e.OutputIndex)
			}
		case "response.function_call_arguments.delta":
			if c := calls[e.OutputIndex]; c != nil {
				c.Args += e.Delta
			} else {
				t.Err = fmt.Sprintf("arguments for output %d, which is no function call", e.OutputIndex)
			}
		case "response.output_item.done":
			detail.Items = append(detail.Items, norm(e.Item))
		case "response.completed", "response.incomplete":
			t.Done = true
			haveFinal = true
			_ = json.Unmarshal(e.Response, &final)
			detail.Final = norm(e.Response)
		case "response.failed":
			haveFinal = true
			_ = json.Unmarshal(e.Response, &final)
			t.Err = errorMessage(final.Error)
		case "error":
			t.Err = orUnnamed(e.Message)
			if e.Message == "" && len(e.Error) > 0 {
				t.Err = errorMessage(e.Error)
			}
		default:
			if ev.name == "error" {
				t.Err = errorMessage([]byte(ev.data))
			}
		}
	}
	for _, i := range order {
		t.Calls = append(t.Calls, calls[i].toolCall)
	}
	t.Choices = 1
	t.Stop = final.stop()
	f := final.turn()
	f.Done, f.Err = t.Done, t.Err
	if !haveFinal {
		f.Stop = ""
	}
	detail.Deltas = t
	t.Detail = detail
	return respStreamTurns{deltas: t, final: f}
}

// responsesJSONTurn reads a whole response object (or an error body).
func responsesJSONTurn(body []byte) turn {
	var r responseObject
	var e struct {
		Error  json.RawMessage `json:"error"`
		Object string          `json:"object"`
	}
	if json.Unmarshal(body, &e) != nil || json.Unmarshal(body, &r) != nil {
		return turn{Err: "unreadable answer: " + string(body)}
	}
	if e.Object != "response" && len(e.Error) > 0 && string(e.Error) != "null" {
		return turn{Err: errorMessage(e.Error)}
	}
	t := r.turn()
	t.Done = e.Object == "response"
	if r.Status == "failed" {
		t.Err = errorMessage(r.Error)
	}
	t.Detail = norm(body)
	return t
}

// withoutEvent returns an SSE stream without its first event whose block
// contains marker, so that a test can take one thing out of a recording.
func withoutEvent(t *testing.T, body []byte, marker string) []byte {
	t.Helper()
	blocks := strings.SplitAfter(string(body), "\n\n")
	for i, b := range blocks {
		if strings.Contains(b, marker) {
			return []byte(strings.Join(append(blocks[:i:i], blocks[i+1:]...), ""))
		}
	}
	t.Fatalf("no event contains %q", marker)
	return nil
}

// TestRecordingReassemblersNoticeLoss: the yardstick of TestRecordedStreams
// can fail. Taking one thing out of a recording (a thinking signature, a
// fragment of one call's arguments, the end of the stream, a tool call's
// arguments in a Responses stream) is seen as a difference.
func TestRecordingReassemblersNoticeLoss(t *testing.T) {
	read := func(path string) []byte {
		b, err := os.ReadFile(filepath.Join(recordingsDir, path))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	thinking := read("anthropic/thinking.sse")
	if d := differ(messagesStreamTurn(withoutEvent(t, thinking, `"signature_delta"`)), messagesStreamTurn(thinking)); d == "" {
		t.Error("a Messages stream without its thinking signature reads the same")
	}
	if p := crossProblems(dMessages, dMessages, messagesStreamTurn(withoutEvent(t, thinking, `"message_stop"`)), messagesStreamTurn(thinking)); len(p) == 0 {
		t.Error("a Messages stream without message_stop reads as complete")
	}

	calls := read("openai/chat-parallel-tool-calls.sse")
	want := chatStreamTurn(calls)
	if len(want.Calls) != 2 || !jsonEqual(want.Calls[1].Args, `{"ticker":"AAPL","exchange":"NASDAQ"}`) {
		t.Fatalf("the recording reads as %s", callsString(want.Calls))
	}
	cut := withoutEvent(t, calls, `"arguments":"SDAQ`)
	if p := crossProblems(dChat, dChat, chatStreamTurn(cut), want); len(p) == 0 {
		t.Error("a Chat stream missing one fragment of a call's arguments reads the same")
	}

	fc := read("openai/responses-encrypted-reasoning-tool-call.sse")
	full := responsesStreamRead(fc)
	if len(full.final.Calls) != 1 || len(full.deltas.Calls) != 1 || !jsonEqual(full.deltas.Calls[0].Args, full.final.Calls[0].Args) {
		t.Fatalf("the recording reads as %s and %s", callsString(full.deltas.Calls), callsString(full.final.Calls))
	}
	lost := responsesStreamRead(withoutEvent(t, fc, `"response.function_call_arguments.delta"`))
	if p := crossProblems(dResponses, dResponses, lost.deltas, full.deltas); len(p) == 0 {
		t.Error("a Responses stream missing an arguments delta reads the same")
	}
}
