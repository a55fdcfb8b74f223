package chat

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestReadDelta(t *testing.T) {
	cases := []struct {
		name, choices string
		want          Delta
	}{
		{"none", ``, Delta{}},
		{"null", `null`, Delta{}},
		{"empty (Azure's prompt filter results, usage)", `[]`, Delta{}},
		{"text and reasoning, reasoning first", `[{"index":0,"delta":{"content":"b","reasoning_content":"a"},"finish_reason":null}]`,
			Delta{Pieces: []Piece{{ChanReasoning, "a"}, {ChanText, "b"}}}},
		{"the same reasoning under both names", `[{"index":0,"delta":{"reasoning_content":"r","reasoning":"r"}}]`,
			Delta{Pieces: []Piece{{ChanReasoning, "r"}}}},
		{"reasoning only", `[{"delta":{"reasoning":"r","reasoning_content":""}}]`, Delta{Pieces: []Piece{{ChanReasoning, "r"}}}},
		{"Mistral's parts", `[{"index":0,"delta":{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"t1"},{"type":"text","text":"t2"}]},{"type":"text","text":"x"}]}}]`,
			Delta{Pieces: []Piece{{ChanReasoning, "t1"}, {ChanReasoning, "t2"}, {ChanText, "x"}}}},
		{"other parts", `[{"index":0,"delta":{"content":[{"type":"refusal","refusal":"no"},{"type":"reasoning","reasoning":"r"},{"type":"thinking","thinking":"s"},{"type":"text","text":""}]}}]`,
			Delta{Pieces: []Piece{{ChanRefusal, "no"}, {ChanReasoning, "r"}, {ChanReasoning, "s"}}}},
		{"refusal last", `[{"index":0,"delta":{"refusal":"no","content":"c"}}]`, Delta{Pieces: []Piece{{ChanText, "c"}, {ChanRefusal, "no"}}}},
		{"nulls", `[{"index":null,"delta":{"content":null,"refusal":null,"tool_calls":null,"function_call":null},"finish_reason":null,"logprobs":null}]`, Delta{}},
		{"null delta", `[{"index":0,"delta":null,"finish_reason":"stop"}]`, Delta{Finish: "stop"}},
		{"tool calls", `[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\""}},{"function":{"arguments":{"y":1}}},{"index":2,"function":null}]}}]`,
			Delta{Calls: []CallDelta{{Index: 1, ID: "a", Name: "f", Args: `{"x"`}, {Args: `{"y":1}`}, {Index: 2}}}},
		{"unknown members", `[{"index":0,"delta":{"audio":{"x":1},"index":0},"content_filter_results":{"hate":{}}}]`, Delta{}},
	}
	for _, c := range cases {
		var d Delta
		if err := ReadDelta(json.RawMessage(c.choices), &d); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		got := Delta{Pieces: d.Pieces, Calls: d.Calls, Finish: d.Finish}
		if len(got.Pieces) == 0 {
			got.Pieces = nil
		}
		if len(got.Calls) == 0 {
			got.Calls = nil
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got  %+v\n want %+v", c.name, got, c.want)
		}
	}
}

func TestReadDeltaUnreadable(t *testing.T) {
	for name, choices := range map[string]string{
		"not an array":           `{"index":0}`,
		"a second choice":        `[{"index":1,"delta":{"content":"x"}}]`,
		"a null choice":          `[null]`,
		"content a number":       `[{"delta":{"content":5}}]`,
		"content an object":      `[{"delta":{"content":{"text":"x"}}}]`,
		"refusal a bool":         `[{"delta":{"refusal":true}}]`,
		"reasoning an object":    `[{"delta":{"reasoning":{"text":"x"}}}]`,
		"an image part":          `[{"delta":{"content":[{"type":"image_url","image_url":{"url":"u"}}]}}]`,
		"a null part":            `[{"delta":{"content":[null]}}]`,
		"thinking not text":      `[{"delta":{"content":[{"type":"thinking","thinking":[{"type":"image"}]}]}}]`,
		"thinking a number":      `[{"delta":{"content":[{"type":"thinking","thinking":3}]}}]`,
		"tool_calls an object":   `[{"delta":{"tool_calls":{"index":0}}}]`,
		"a null tool call":       `[{"delta":{"tool_calls":[null]}}]`,
		"a negative call index":  `[{"delta":{"tool_calls":[{"index":-1}]}}]`,
		"arguments a number":     `[{"delta":{"tool_calls":[{"function":{"arguments":1}}]}}]`,
		"name a number":          `[{"delta":{"tool_calls":[{"function":{"name":1}}]}}]`,
		"legacy function_call":   `[{"delta":{"function_call":{"name":"f","arguments":"{}"}}}]`,
		"finish_reason a number": `[{"delta":{},"finish_reason":1}]`,
		"a fractional index":     `[{"index":0.5,"delta":{}}]`,
		"delta a string":         `[{"delta":"x"}]`,
	} {
		var d Delta
		err := ReadDelta(json.RawMessage(choices), &d)
		ue, ok := err.(*UnreadableError)
		if !ok {
			t.Errorf("%s: err %v, want *UnreadableError", name, err)
			continue
		}
		// The reason names what is wrong, never the upstream's bytes.
		if ue.Reason == "" || strings.ContainsAny(ue.Reason, "{}<") {
			t.Errorf("%s: reason %q", name, ue.Reason)
		}
	}
}

func TestReadAnswer(t *testing.T) {
	a, err := ReadAnswer(json.RawMessage(`[{"index":0,"message":{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"t"}]},{"type":"text","text":"x"}],"refusal":"no",
		"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":""}},{"id":"d","function":{"name":"g","arguments":{"a":1}}}]},"finish_reason":"tool_calls"}]`))
	if err != nil {
		t.Fatal(err)
	}
	want := Answer{Pieces: []Piece{{ChanReasoning, "t"}, {ChanText, "x"}, {ChanRefusal, "no"}}, Finish: "tool_calls",
		Calls: []ToolCall{{ID: "c", Type: "function", Function: FunctionCall{Name: "f"}}, {ID: "d", Type: "function", Function: FunctionCall{Name: "g", Arguments: `{"a":1}`}}}}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("got  %+v\nwant %+v", a, want)
	}
	for name, choices := range map[string]string{
		"absent":        ``,
		"null":          `null`,
		"empty":         `[]`,
		"choice 1 only": `[{"index":1,"message":{"content":"x"}}]`,
		"two choices":   `[{"index":0,"message":{"content":"x"}},{"index":1,"message":{"content":"y"}}]`,
		"content 5":     `[{"index":0,"message":{"content":5}}]`,
	} {
		if _, err := ReadAnswer(json.RawMessage(choices)); err == nil {
			t.Errorf("%s: read", name)
		} else if _, ok := err.(*UnreadableError); !ok {
			t.Errorf("%s: err %T", name, err)
		}
	}
}

func TestFirstChoiceIsZero(t *testing.T) {
	for data, want := range map[string]bool{
		`{"id":"x","choices":[{"index":0,"delta":{"content":"a"}}]}`:         true,
		`{"choices":[{"delta":{"content":"a"},"index":0}]}`:                  true,
		`{"choices":[{"delta":{"content":"a"}}]}`:                            true,
		`{"choices":[{"index":null,"delta":{"content":"a"}}]}`:               true,
		`{"x":{"choices":[{"index":1}]},"choices":[{"index":0,"delta":{}}]}`: true,
		`{"choices":[{"index":1,"delta":{"content":"a"}}]}`:                  false,
		`{"choices":[{"delta":{"content":"a"},"index":2}]}`:                  false,
		`{"choices":[{"\u0069ndex":1,"delta":{"content":"a"}}]}`:             false,
		`{"choices":[{"index":0.0,"delta":{}}]}`:                             false,
		`{"choices":[]}`:                                                     false,
		`[]`:                                                                 false,
	} {
		if got := FirstChoiceIsZero([]byte(data)); got != want {
			t.Errorf("%s: %v, want %v", data, got, want)
		}
	}
}

// FirstChoice takes a chunk of the shape of one it accepted without
// scanning it again, and scans any other: the index may be after the text.
func TestFirstChoiceRemembersShapes(t *testing.T) {
	var f FirstChoice
	check := func(data string, want bool) {
		t.Helper()
		i := strings.Index(data, `"x`)
		j := strings.LastIndex(data, `x"`) + 2
		if got := f.IsZero([]byte(data), []byte(data[:i]), []byte(data[j:])); got != want {
			t.Errorf("%s: %v, want %v", data, got, want)
		}
	}
	check(`{"choices":[{"delta":{"content":"x"},"index":0}]}`, true)
	check(`{"choices":[{"delta":{"content":"xyzx"},"index":0}]}`, true)
	check(`{"choices":[{"delta":{"content":"x"},"index":1}]}`, false)
	check(`{"choices":[{"delta":{"reasoning":"x"},"index":0}]}`, true)
	check(`{"choices":[{"delta":{"content":"xx"},"index":0}]}`, true)
	check(`{"choices":[{"index":2,"delta":{"content":"x"}}]}`, false)
	if f.seen[0].prefix == nil || f.seen[1].prefix == nil {
		t.Errorf("shapes not remembered: %+v", f.seen)
	}
}
