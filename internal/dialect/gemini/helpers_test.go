package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// sliceSource replays parsed events: the benchmarks time the translator,
// not sse.Reader.
type sliceSource struct {
	evs []sse.Event
	i   int
}

func (s *sliceSource) Next() (sse.Event, error) {
	if s.i == len(s.evs) {
		return sse.Event{}, io.EOF
	}
	s.i++
	return s.evs[s.i-1], nil
}

func parseAll(tb testing.TB, text string) []sse.Event {
	tb.Helper()
	rd := sse.NewReader(strings.NewReader(text), 0)
	var evs []sse.Event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			tb.Fatal(err)
		}
		evs = append(evs, ev.Clone())
	}
}

func reader(text string) sse.Source { return sse.NewReader(strings.NewReader(text), 0) }

func readFile(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// drain reads src to its end: the events and the error that ended it.
func drain(src sse.Source) ([]sse.Event, error) {
	var evs []sse.Event
	for {
		ev, err := src.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev.Clone())
	}
}

// chatAnswer is a Chat stream put back together as a client's
// accumulator does, checking the protocol on the way.
type chatAnswer struct {
	role, content, reasoning string
	calls                    []chat.ToolCall
	finish                   string
	usage                    map[string]any
	errBody                  map[string]any
	done                     bool
	chunks                   int
}

func readChat(tb testing.TB, src sse.Source) (*chatAnswer, error) {
	tb.Helper()
	a := &chatAnswer{}
	for {
		ev, err := src.Next()
		if err != nil {
			if err == io.EOF {
				return a, nil
			}
			return a, err
		}
		if a.done {
			tb.Fatalf("an event after [DONE]: %s", ev.Raw)
		}
		if string(ev.Data) == "[DONE]" {
			a.done = true
			continue
		}
		a.chunks++
		var c struct {
			Choices []struct {
				Delta struct {
					Role             string `json:"role"`
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
					ToolCalls        []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string  `json:"name"`
							Arguments *string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
			Error map[string]any `json:"error"`
		}
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			tb.Fatalf("a Chat chunk that is not JSON: %s", ev.Data)
		}
		if c.Error != nil {
			a.errBody = c.Error
			continue
		}
		if c.Usage != nil {
			a.usage = c.Usage
		}
		for _, ch := range c.Choices {
			d := ch.Delta
			if d.Role != "" {
				a.role = d.Role
			}
			if a.role == "" && (d.Content != "" || d.ReasoningContent != "" || len(d.ToolCalls) > 0) {
				tb.Fatalf("content before the role chunk: %s", ev.Data)
			}
			if a.finish != "" && (d.Content != "" || d.ReasoningContent != "" || len(d.ToolCalls) > 0) {
				tb.Fatalf("content after the finish_reason: %s", ev.Data)
			}
			a.content += d.Content
			a.reasoning += d.ReasoningContent
			for _, tc := range d.ToolCalls {
				for len(a.calls) <= tc.Index {
					a.calls = append(a.calls, chat.ToolCall{Type: "function"})
				}
				c := &a.calls[tc.Index]
				if tc.ID != "" {
					c.ID = tc.ID
				}
				if tc.Function.Name != "" {
					c.Function.Name = tc.Function.Name
				}
				if tc.Function.Arguments != nil {
					c.Function.Arguments += *tc.Function.Arguments
				}
			}
			if ch.FinishReason != nil {
				a.finish = *ch.FinishReason
			}
		}
	}
}

// geminiAnswer is a Gemini stream put back together as the @google/genai
// SDK's consumers do (the chunks' parts in order), checking the protocol
// on the way: data events of one candidate, nothing after the
// finishReason.
type geminiAnswer struct {
	text, thought string
	calls         []functionCall
	sigs          []string
	finish        string
	usage         *UsageMetadata
	model, id     string
	errBody       *ErrorBody
	// end is how the stream ended: "finish" (the finishReason chunk),
	// "error" (an in-band error), "unreadable" (a *chat.UnreadableError),
	// or "" (none: truncation).
	end string
}

func readGemini(tb testing.TB, src sse.Source) (*geminiAnswer, error) {
	tb.Helper()
	a := &geminiAnswer{}
	for {
		ev, err := src.Next()
		if err != nil {
			if errors.As(err, new(*chat.UnreadableError)) {
				a.end = "unreadable"
				return a, nil
			}
			if err == io.EOF {
				return a, nil
			}
			return a, err
		}
		if a.end != "" {
			tb.Fatalf("an event after the end (%s): %s", a.end, ev.Raw)
		}
		if !bytes.HasPrefix(ev.Raw, []byte("data: ")) {
			var e ErrorBody
			if json.Unmarshal(ev.Raw, &e) != nil || e.Error.Code < 400 || e.Error.Code > 599 {
				tb.Fatalf("an event that is neither a data event nor an error the SDK raises: %q", ev.Raw)
			}
			a.errBody, a.end = &e, "error"
			continue
		}
		var r generateResponse
		if err := json.Unmarshal(ev.Data, &r); err != nil {
			tb.Fatalf("a Gemini chunk that is not a GenerateContentResponse: %s", ev.Data)
		}
		if len(r.Candidates) != 1 || r.Candidates[0].Content == nil || len(r.Candidates[0].Content.Parts) == 0 {
			tb.Fatalf("a chunk without one candidate with parts: %s", ev.Data)
		}
		a.model, a.id = r.ModelVersion, r.ResponseID
		if r.UsageMetadata != nil {
			a.usage = r.UsageMetadata
		}
		for _, p := range r.Candidates[0].Content.Parts {
			switch {
			case p.FunctionCall != nil:
				a.calls = append(a.calls, *p.FunctionCall)
				a.sigs = append(a.sigs, p.ThoughtSignature)
			case p.Thought:
				a.thought += *p.Text
			case p.Text != nil:
				a.text += *p.Text
			}
		}
		if f := r.Candidates[0].FinishReason; f != "" {
			a.finish, a.end = f, "finish"
		}
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// mustJSON decodes JSON for a test's comparisons.
func mustJSON(tb testing.TB, b []byte) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		tb.Fatalf("not a JSON object: %v\n%s", err, b)
	}
	return m
}
