package splice

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// readEvents parses a stream into events (cloned).
func readEvents(t testing.TB, raw []byte) []sse.Event {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(raw), 0)
	var out []sse.Event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.Clone())
	}
}

func rspRecordings(t testing.TB) map[string][]sse.Event {
	t.Helper()
	files, err := filepath.Glob("../../testdata/recordings/openai/responses-*.sse")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	out := map[string][]sse.Event{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = readEvents(t, raw)
	}
	return out
}

// rspItem is an item of a synthetic stream.
type rspItem struct {
	typ  string // reasoning, message, function_call, custom_tool_call
	id   string
	text string // summary, text, arguments or input
	name string
}

// rspBuild writes a Responses stream as OpenAI does: events with an
// event: line, sequence_number from 0, each text in rsp_pieces of up to n
// runes.
func rspBuild(respID string, items []rspItem, n int) []sse.Event {
	var evs []sse.Event
	seq := 0
	emit := func(typ string, m map[string]any) {
		m["type"] = typ
		m["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(m)
		evs = append(evs, sse.NewEvent(typ, b))
	}
	resp := func(status string, output []any) map[string]any {
		return map[string]any{"id": respID, "object": "response", "created_at": 1700000000, "status": status, "model": "m-" + respID, "output": output, "usage": nil}
	}
	emit("response.created", map[string]any{"response": resp("in_progress", []any{})})
	emit("response.in_progress", map[string]any{"response": resp("in_progress", []any{})})
	var output []any
	for i, it := range items {
		base := map[string]any{"item_id": it.id, "output_index": i}
		with := func(kv ...any) map[string]any {
			m := map[string]any{}
			for k, v := range base {
				m[k] = v
			}
			for j := 0; j < len(kv); j += 2 {
				m[kv[j].(string)] = kv[j+1]
			}
			return m
		}
		var added, done map[string]any
		switch it.typ {
		case "reasoning":
			added = map[string]any{"id": it.id, "type": "reasoning", "encrypted_content": "enc-" + it.id, "summary": []any{}}
			done = map[string]any{"id": it.id, "type": "reasoning", "encrypted_content": "enc-" + it.id, "summary": []any{map[string]any{"type": "summary_text", "text": it.text}}}
		case "message":
			added = map[string]any{"id": it.id, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}
			done = map[string]any{"id": it.id, "type": "message", "status": "completed", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": it.text}}}
		case "function_call":
			added = map[string]any{"id": it.id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": "call_" + it.id, "name": it.name}
			done = map[string]any{"id": it.id, "type": "function_call", "status": "completed", "arguments": it.text, "call_id": "call_" + it.id, "name": it.name}
		case "custom_tool_call":
			added = map[string]any{"id": it.id, "type": "custom_tool_call", "status": "in_progress", "input": "", "call_id": "call_" + it.id, "name": it.name}
			done = map[string]any{"id": it.id, "type": "custom_tool_call", "status": "completed", "input": it.text, "call_id": "call_" + it.id, "name": it.name}
		}
		emit("response.output_item.added", map[string]any{"output_index": i, "item": added})
		switch it.typ {
		case "reasoning":
			emit("response.reasoning_summary_part.added", with("summary_index", 0, "part", map[string]any{"type": "summary_text", "text": ""}))
			for _, p := range rsp_pieces(it.text, n) {
				emit("response.reasoning_summary_text.delta", with("summary_index", 0, "delta", p))
			}
			emit("response.reasoning_summary_text.done", with("summary_index", 0, "text", it.text))
			emit("response.reasoning_summary_part.done", with("summary_index", 0, "part", map[string]any{"type": "summary_text", "text": it.text}))
		case "message":
			emit("response.content_part.added", with("content_index", 0, "part", map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": ""}))
			for _, p := range rsp_pieces(it.text, n) {
				emit("response.output_text.delta", with("content_index", 0, "delta", p, "logprobs", []any{}))
			}
			emit("response.output_text.done", with("content_index", 0, "text", it.text, "logprobs", []any{}))
			emit("response.content_part.done", with("content_index", 0, "part", map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": it.text}))
		case "function_call":
			for _, p := range rsp_pieces(it.text, n) {
				emit("response.function_call_arguments.delta", with("delta", p))
			}
			emit("response.function_call_arguments.done", with("arguments", it.text))
		case "custom_tool_call":
			for _, p := range rsp_pieces(it.text, n) {
				emit("response.custom_tool_call_input.delta", with("delta", p))
			}
			emit("response.custom_tool_call_input.done", with("input", it.text))
		}
		emit("response.output_item.done", map[string]any{"output_index": i, "item": done})
		output = append(output, done)
	}
	final := resp("completed", output)
	final["usage"] = map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 2}, "output_tokens": 20, "output_tokens_details": map[string]any{"reasoning_tokens": 5}, "total_tokens": 30}
	emit("response.completed", map[string]any{"response": final})
	return evs
}

func rsp_pieces(s string, n int) []string {
	r := []rune(s)
	var out []string
	for len(r) > 0 {
		k := min(n, len(r))
		out = append(out, string(r[:k]))
		r = r[k:]
	}
	return out
}

// rspView is a client's view of a Responses stream, accumulated as the
// SDKs' stream helpers do (a snapshot by output_index and content_index),
// with the stream's invariants checked on the way.
type rspView struct {
	items     []*viewItem
	final     map[string]any
	finalRaw  json.RawMessage
	reasoning string
	created   int
	createdID string // the id of response.created's response
	events    int
}

type viewItem struct {
	id, typ string
	content []string // output_text by content_index
	summary []string
	rtext   []string
	args    string // function_call arguments or custom_tool_call input
	done    map[string]any
}

// text is the answer: the output_text of every message, in order.
func (v *rspView) text() string {
	var b strings.Builder
	for _, it := range v.items {
		if it.typ == "message" {
			for _, c := range it.content {
				b.WriteString(c)
			}
		}
	}
	return b.String()
}

type toolCall struct{ typ, name, args string }

func (v *rspView) calls() []toolCall {
	var out []toolCall
	for _, it := range v.items {
		if it.typ == "function_call" || it.typ == "custom_tool_call" {
			name, _ := it.done["name"].(string)
			out = append(out, toolCall{it.typ, name, it.args})
		}
	}
	return out
}

type rspEv struct {
	Type         string          `json:"type"`
	Seq          *int64          `json:"sequence_number"`
	OutputIndex  *int            `json:"output_index"`
	ContentIndex *int            `json:"content_index"`
	SummaryIndex *int            `json:"summary_index"`
	ItemID       *string         `json:"item_id"`
	Delta        *string         `json:"delta"`
	Text         *string         `json:"text"`
	Item         json.RawMessage `json:"item"`
	Response     json.RawMessage `json:"response"`
}

// viewStream reassembles evs (what the client got) and checks it: valid
// SSE blocks whose data is JSON, sequence_number going up by one from the
// first, one response.created first, output items added in order
// 0, 1, 2..., every item event naming an added item by its id, parts
// added in order, each .done text equal to its deltas, one end event,
// last, whose output is the items done.
func viewStream(evs []sse.Event) (*rspView, error) {
	v := &rspView{}
	var raw []byte
	for _, e := range evs {
		raw = append(raw, e.Raw...)
	}
	rd := sse.NewReader(bytes.NewReader(raw), 0)
	var seq int64 = -1
	ended := false
	for i := 0; ; i++ {
		e, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return v, err
		}
		if e.Unterminated {
			return v, fmt.Errorf("event %d unterminated", i)
		}
		if e.IsComment() {
			continue
		}
		v.events++
		if ended {
			return v, fmt.Errorf("event %d after the end", i)
		}
		var m rspEv
		if err := json.Unmarshal(e.Data, &m); err != nil {
			return v, fmt.Errorf("event %d: %v: %s", i, err, e.Data)
		}
		if e.Type != "" && e.Type != m.Type {
			return v, fmt.Errorf("event %d: event: %s, type %s", i, e.Type, m.Type)
		}
		if m.Seq == nil {
			return v, fmt.Errorf("event %d (%s): no sequence_number", i, m.Type)
		}
		if seq >= 0 && *m.Seq != seq+1 {
			return v, fmt.Errorf("event %d (%s): sequence_number %d after %d", i, m.Type, *m.Seq, seq)
		}
		seq = *m.Seq
		if (m.Type == "response.created") != (v.created == 0 && v.events == 1) {
			return v, fmt.Errorf("event %d: %s (response.created comes once, first)", i, m.Type)
		}
		if m.Type == "response.created" {
			v.created++
			var r struct{ ID string }
			_ = json.Unmarshal(m.Response, &r)
			v.createdID = r.ID
		}
		var it *viewItem
		if m.OutputIndex != nil && m.Type != "response.output_item.added" {
			if *m.OutputIndex < 0 || *m.OutputIndex >= len(v.items) {
				return v, fmt.Errorf("event %d (%s): output_index %d of %d items", i, m.Type, *m.OutputIndex, len(v.items))
			}
			it = v.items[*m.OutputIndex]
			if m.ItemID != nil && *m.ItemID != it.id {
				return v, fmt.Errorf("event %d (%s): item_id %s, item %d is %s", i, m.Type, *m.ItemID, *m.OutputIndex, it.id)
			}
		}
		idx := func(p *int) int {
			if p == nil {
				return -1
			}
			return *p
		}
		str := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		switch m.Type {
		case "response.output_item.added":
			if idx(m.OutputIndex) != len(v.items) {
				return v, fmt.Errorf("event %d: item added at %d, %d items", i, idx(m.OutputIndex), len(v.items))
			}
			var item struct{ ID, Type string }
			if err := json.Unmarshal(m.Item, &item); err != nil {
				return v, fmt.Errorf("event %d: item %v", i, err)
			}
			v.items = append(v.items, &viewItem{id: item.ID, typ: item.Type})
		case "response.content_part.added":
			if it.typ == "reasoning" {
				continue
			}
			if idx(m.ContentIndex) != len(it.content) {
				return v, fmt.Errorf("event %d: part %d added, %d parts", i, idx(m.ContentIndex), len(it.content))
			}
			it.content = append(it.content, "")
		case "response.output_text.delta":
			c := idx(m.ContentIndex)
			if c < 0 || c >= len(it.content) {
				return v, fmt.Errorf("event %d: text delta in part %d of %d", i, c, len(it.content))
			}
			it.content[c] += str(m.Delta)
		case "response.output_text.done":
			c := idx(m.ContentIndex)
			if c < 0 || c >= len(it.content) || it.content[c] != str(m.Text) {
				return v, fmt.Errorf("event %d: output_text.done %q, deltas %q", i, str(m.Text), it.content)
			}
		case "response.reasoning_summary_part.added":
			if idx(m.SummaryIndex) != len(it.summary) {
				return v, fmt.Errorf("event %d: summary part %d added, %d parts", i, idx(m.SummaryIndex), len(it.summary))
			}
			it.summary = append(it.summary, "")
		case "response.reasoning_summary_text.delta":
			c := idx(m.SummaryIndex)
			if c < 0 || c >= len(it.summary) {
				return v, fmt.Errorf("event %d: summary delta in part %d of %d", i, c, len(it.summary))
			}
			it.summary[c] += str(m.Delta)
			v.reasoning += str(m.Delta)
		case "response.reasoning_summary_text.done":
			c := idx(m.SummaryIndex)
			if c < 0 || c >= len(it.summary) || it.summary[c] != str(m.Text) {
				return v, fmt.Errorf("event %d: summary done %q, deltas %q", i, str(m.Text), it.summary)
			}
		case "response.reasoning_text.delta":
			c := idx(m.ContentIndex)
			for len(it.rtext) <= c {
				it.rtext = append(it.rtext, "")
			}
			it.rtext[c] += str(m.Delta)
			v.reasoning += str(m.Delta)
		case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
			it.args += str(m.Delta)
		case "response.output_item.done":
			it = v.items[idx(m.OutputIndex)]
			if err := json.Unmarshal(m.Item, &it.done); err != nil {
				return v, fmt.Errorf("event %d: item %v", i, err)
			}
			if err := it.check(); err != nil {
				return v, fmt.Errorf("event %d: %v", i, err)
			}
		case "response.completed", "response.incomplete", "response.failed":
			ended = true
			v.finalRaw = m.Response
			if err := json.Unmarshal(m.Response, &v.final); err != nil {
				return v, fmt.Errorf("event %d: response %v", i, err)
			}
			if err := v.checkFinal(); err != nil {
				return v, fmt.Errorf("event %d (%s): %v", i, m.Type, err)
			}
		}
	}
	if !ended {
		return v, fmt.Errorf("no end event")
	}
	return v, nil
}

// check compares the item of output_item.done with what its deltas made.
func (it *viewItem) check() error {
	if id, _ := it.done["id"].(string); id != it.id {
		return fmt.Errorf("item done with id %q, added as %q", id, it.id)
	}
	switch it.typ {
	case "message":
		var texts []string
		for _, c := range list(it.done["content"]) {
			t, _ := c.(map[string]any)["text"].(string)
			texts = append(texts, t)
		}
		if !reflect.DeepEqual(texts, it.content) && !(len(texts) == 0 && len(it.content) == 0) {
			return fmt.Errorf("message %s done with %q, deltas %q", it.id, texts, it.content)
		}
	case "reasoning":
		var texts []string
		for _, c := range list(it.done["summary"]) {
			t, _ := c.(map[string]any)["text"].(string)
			texts = append(texts, t)
		}
		if len(it.summary) > 0 && !reflect.DeepEqual(texts, it.summary) {
			return fmt.Errorf("reasoning %s done with %q, deltas %q", it.id, texts, it.summary)
		}
	case "function_call":
		if a, _ := it.done["arguments"].(string); a != it.args {
			return fmt.Errorf("call %s done with %q, deltas %q", it.id, a, it.args)
		}
	case "custom_tool_call":
		if a, _ := it.done["input"].(string); a != it.args {
			return fmt.Errorf("call %s done with %q, deltas %q", it.id, a, it.args)
		}
	}
	return nil
}

func list(v any) []any { l, _ := v.([]any); return l }

// checkFinal compares the final response's output with the items done.
func (v *rspView) checkFinal() error {
	out := list(v.final["output"])
	var done []map[string]any
	for _, it := range v.items {
		if it.done != nil {
			done = append(done, it.done)
		}
	}
	if len(out) != len(done) {
		return fmt.Errorf("output has %d items, %d done", len(out), len(done))
	}
	for i := range out {
		// encrypted_content aside: a provider encrypts it anew for each
		// (the recordings' differ between output_item.done and the end).
		if o, ok := out[i].(map[string]any); ok {
			o = maps.Clone(o)
			d := maps.Clone(done[i])
			delete(o, "encrypted_content")
			delete(d, "encrypted_content")
			out[i], done[i] = o, d
		}
		if !reflect.DeepEqual(out[i], any(done[i])) {
			a, _ := json.Marshal(out[i])
			b, _ := json.Marshal(done[i])
			return fmt.Errorf("output[%d] = %s, item done %s", i, a, b)
		}
	}
	return nil
}

// passAll feeds evs through rec and returns what it forwards (cloned).
func passAll(rec Recorder, evs []sse.Event) []sse.Event {
	var out []sse.Event
	for _, e := range evs {
		for _, o := range rec.Pass(e) {
			out = append(out, o.Clone())
		}
	}
	return out
}

// spliceAll feeds cont through sp then rec, as the relay does.
func spliceAll(rec Recorder, sp Splicer, cont []sse.Event) []sse.Event {
	var out []sse.Event
	for _, e := range cont {
		for _, s := range sp.Next(e) {
			for _, o := range rec.Pass(s) {
				out = append(out, o.Clone())
			}
		}
	}
	return out
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	return reflect.DeepEqual(x, y)
}
