package splice

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// parseSSE reads a stream's blocks (copies).
func parseSSE(t testing.TB, s string) []sse.Event {
	t.Helper()
	rd := sse.NewReader(strings.NewReader(s), 0)
	var evs []sse.Event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev.Clone())
	}
}

// block is one event of the stream s (one block).
func block(t testing.TB, s string) sse.Event {
	t.Helper()
	evs := parseSSE(t, s)
	if len(evs) != 1 {
		t.Fatalf("%q: %d blocks", s, len(evs))
	}
	return evs[0]
}

// chunkData is a chunk of the stream "c1" with the delta and finish
// (JSON values) given.
func chunkData(delta, finish string) string {
	return `{"id":"c1","object":"chat.completion.chunk","created":100,"model":"m1","system_fingerprint":"fp1","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]}`
}

func chunkEv(t testing.TB, delta, finish string) sse.Event {
	return block(t, "data: "+chunkData(delta, finish)+"\n\n")
}

// contEv is a chunk of a continuation "k2" (another model, no fingerprint).
func contEv(t testing.TB, delta, finish string) sse.Event {
	return block(t, `data: {"id":"k2","object":"chat.completion.chunk","created":200,"model":"m2","choices":[{"index":0,"delta":`+delta+`,"logprobs":null,"finish_reason":`+finish+`}]}`+"\n\n")
}

func doneEv(t testing.TB) sse.Event { return block(t, "data: [DONE]\n\n") }

// clone copies events returned by Pass or Next (valid until the next call).
func clone(evs []sse.Event) []sse.Event {
	out := make([]sse.Event, len(evs))
	for i, ev := range evs {
		out[i] = ev.Clone()
	}
	return out
}

// feed passes evs through the recorder and returns what it forwards.
func feed(r Recorder, evs ...sse.Event) []sse.Event {
	var out []sse.Event
	for _, ev := range evs {
		out = append(out, clone(r.Pass(ev))...)
	}
	return out
}

// splice runs evs through the splicer, and what it returns through the
// recorder (nil: none).
func splice(sp Splicer, r Recorder, evs ...sse.Event) []sse.Event {
	var out []sse.Event
	for _, ev := range evs {
		for _, o := range clone(sp.Next(ev)) {
			if r == nil {
				out = append(out, o)
				continue
			}
			out = append(out, clone(r.Pass(o))...)
		}
	}
	return out
}

// datas is the data of each event ("" for a comment, ": text" for its raw).
func datas(evs []sse.Event) []string {
	var s []string
	for _, ev := range evs {
		if ev.IsComment() {
			s = append(s, strings.TrimSpace(string(ev.Raw)))
			continue
		}
		s = append(s, string(ev.Data))
	}
	return s
}

// clientCall is a tool call as a client assembles it.
type clientCall struct {
	ID, Name, Args string
}

// client reassembles a Chat stream as an SDK's accumulator does, with no
// code of the package under test.
type client struct {
	content, reasoning, refusal strings.Builder
	calls                       map[int]*clientCall
	finish                      string
	roles, dones, comments      int
	ids, models                 map[string]int
	usage                       map[string]any
	errs                        []string
}

func newClient() *client {
	return &client{calls: map[int]*clientCall{}, ids: map[string]int{}, models: map[string]int{}}
}

func (c *client) read(evs ...sse.Event) {
	for _, ev := range evs {
		c.read1(ev)
	}
}

func (c *client) read1(ev sse.Event) {
	if ev.IsComment() {
		c.comments++
		return
	}
	if ev.IsDone() {
		c.dones++
		return
	}
	if c.dones > 0 {
		c.errs = append(c.errs, "an event after [DONE]: "+string(ev.Raw))
	}
	var ch struct {
		ID      string         `json:"id"`
		Model   string         `json:"model"`
		Usage   map[string]any `json:"usage"`
		Choices []struct {
			Index *int `json:"index"`
			Delta struct {
				Role             string          `json:"role"`
				Content          json.RawMessage `json:"content"`
				ReasoningContent string          `json:"reasoning_content"`
				Reasoning        string          `json:"reasoning"`
				Refusal          string          `json:"refusal"`
				ToolCalls        []struct {
					Index    *int   `json:"index"`
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(ev.Data, &ch); err != nil {
		c.errs = append(c.errs, fmt.Sprintf("%v: %s", err, ev.Data))
		return
	}
	if ch.ID != "" {
		c.ids[ch.ID]++
	}
	if ch.Model != "" {
		c.models[ch.Model]++
	}
	if ch.Usage != nil {
		c.usage = ch.Usage
	}
	for _, x := range ch.Choices {
		if x.Index != nil && *x.Index != 0 {
			continue
		}
		d := x.Delta
		if d.Role != "" {
			c.roles++
		}
		if d.ReasoningContent != "" {
			c.reasoning.WriteString(d.ReasoningContent)
		} else {
			c.reasoning.WriteString(d.Reasoning)
		}
		c.readContent(d.Content)
		c.refusal.WriteString(d.Refusal)
		for _, tc := range d.ToolCalls {
			i := 0
			if tc.Index != nil {
				i = *tc.Index
			}
			call := c.calls[i]
			if call == nil {
				call = &clientCall{}
				c.calls[i] = call
			}
			if tc.ID != "" {
				call.ID = tc.ID
			}
			if tc.Function.Name != "" {
				call.Name = tc.Function.Name
			}
			call.Args += tc.Function.Arguments
		}
		if x.FinishReason != "" {
			c.finish = x.FinishReason
		}
	}
}

// readContent reads a content: a string, or parts (Mistral's text and
// thinking parts).
func (c *client) readContent(raw json.RawMessage) {
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		c.content.WriteString(s)
		return
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Thinking []struct {
			Text string `json:"text"`
		} `json:"thinking"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		c.errs = append(c.errs, "content: "+err.Error())
		return
	}
	for _, p := range parts {
		switch p.Type {
		case "text":
			c.content.WriteString(p.Text)
		case "thinking":
			for _, t := range p.Thinking {
				c.reasoning.WriteString(t.Text)
			}
		}
	}
}

// sortedCalls lists the calls by index.
func (c *client) sortedCalls() []int {
	var is []int
	for i := range c.calls {
		is = append(is, i)
	}
	sort.Ints(is)
	return is
}

// sameCalls reports how a's calls differ from b's ("" when they do not):
// ids, names, arguments JSON-equal.
func sameCalls(a, b *client) string {
	ia, ib := a.sortedCalls(), b.sortedCalls()
	if fmt.Sprint(ia) != fmt.Sprint(ib) {
		return fmt.Sprintf("call indices %v, want %v", ia, ib)
	}
	for _, i := range ia {
		x, y := a.calls[i], b.calls[i]
		if x.ID != y.ID || x.Name != y.Name {
			return fmt.Sprintf("call %d: %+v, want %+v", i, *x, *y)
		}
		var vx, vy any
		ex, ey := json.Unmarshal([]byte(x.Args), &vx), json.Unmarshal([]byte(y.Args), &vy)
		if (ex == nil) != (ey == nil) || ex == nil && fmt.Sprint(vx) != fmt.Sprint(vy) || ex != nil && x.Args != y.Args {
			return fmt.Sprintf("call %d arguments %q, want %q", i, x.Args, y.Args)
		}
	}
	return ""
}

// chatRecordingFiles are the recorded Chat Completions streams.
func chatRecordingFiles(t testing.TB) []string {
	t.Helper()
	root := filepath.Join("..", "..", "testdata", "recordings")
	var files []string
	for _, pat := range []string{"openai/chat-*.sse", "deepseek/*.sse", "groq/*.sse", "mistral/*.sse", "alibaba/*.sse", "xai/*.sse", "azure/*.sse"} {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 15 {
		t.Fatalf("%d Chat recordings found, want the 15 or more of testdata/recordings", len(files))
	}
	return files
}

func readRecording(t testing.TB, path string) []sse.Event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseSSE(t, string(bytes.TrimPrefix(b, []byte("\ufeff"))))
}
