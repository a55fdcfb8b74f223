package pace

import (
	"bytes"
	"encoding/json"
	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
	"github.com/llmrelay/caddy-llm-relay/internal/jsontest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// The fuzz targets compare Classify, StripReasoning and the scanner with a
// reference written on top of encoding/json. Their seeds (the table tests'
// inputs) run in plain `go test`.

func FuzzClassifyStream(f *testing.F) {
	for _, tc := range classifyCases {
		f.Add([]byte(tc.raw))
	}
	f.Add([]byte("data: " + openAIText + "\r\n\r\ndata: " + deepSeekR + "\r\r: x\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r := sse.NewReader(bytes.NewReader(raw), 1<<16)
		var scratch []byte
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			var c Chunk
			c, scratch = Classify(&ev, scratch[:0])
			checkClassify(t, &ev, &c)
		}
	})
}

func FuzzClassifyData(f *testing.F) {
	addChunkSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, ev := range dataEvents(data) {
			c, _ := Classify(&ev, nil)
			checkClassify(t, &ev, &c)
		}
	})
}

// addChunkSeeds adds the chunk data the Classify fuzz targets start from:
// every provider sample, and the edge cases of the rules.
func addChunkSeeds(f *testing.F) {
	for _, s := range []string{openAIText, openAIFirst, openAIStop, openAIUsage, openAITool, openAILogp, openAIN2, openAIRef,
		deepSeekR, deepSeekA, deepSeekUse, orReasonD, orReason, orText,
		`{"choices":[{"delta":{"content":"a\ud83d\ude00\u4f60\n\"<>"}}]}`,
		`{"choices":[{"delta":{"content":"a\ud800"}}]}`,
		`{"object":"error","message":"x"}`,
		`{"choices":[{"delta":{"content":"a","content":"b"}}]}`,
		`[DONE]`, `hello`, ``,
	} {
		f.Add([]byte(s))
	}
}

// dataEvents are the SSE blocks of one data field holding data (more
// than one when data has line breaks).
func dataEvents(data []byte) []sse.Event {
	r := sse.NewReader(strings.NewReader("data: "+string(data)+"\n\n"), 1<<16)
	var evs []sse.Event
	for {
		ev, err := r.Next()
		if err != nil {
			return evs
		}
		evs = append(evs, ev.Clone())
	}
}

// checkClassify checks c = Classify(ev) against the reference rules.
func checkClassify(t *testing.T, ev *sse.Event, c *Chunk) {
	t.Helper()
	if c.Kind == KindText {
		checkText(t, ev, c, -1)
	} else if c.Field != "" || c.Prefix != nil || c.Suffix != nil || c.Text != nil || c.Channel != ChanNone || c.HasRole {
		t.Fatalf("non-text chunk with text fields: %+v", c)
	}
	want, exact := refClassify(ev)
	if c.Kind == want {
		return
	}
	if !exact && c.Kind == KindOther && want == KindText {
		return // only the reference's blind spots (see refClassify)
	}
	if !exact && want == KindOther && (c.Kind == KindText || c.Kind == KindError) {
		return
	}
	t.Fatalf("Classify(%q) = %s, reference says %s (exact %v)", ev.Raw, kindName(c.Kind), kindName(want), exact)
}

// refClassify classifies ev with encoding/json. exact is false when the
// reference cannot tell: duplicate keys (encoding/json keeps the last),
// keys that equal an inspected name only under case folding, or text that
// decodes with U+FFFD (encoding/json hides invalid input that way).
// Runes are checked here too.
func refClassify(ev *sse.Event) (kind Kind, exact bool) {
	switch {
	case ev.IsComment():
		return KindComment, true
	case ev.Type == "error":
		return KindError, true
	case !ev.HasData:
		return KindOther, true
	case ev.IsDone():
		return KindDone, true
	}
	data := ev.Data
	if !json.Valid(data) {
		return KindOther, true
	}
	if depth, _ := jsontest.Shape(data); depth > jsonscan.MaxDepth {
		return KindOther, true
	}
	_, dups := jsontest.Shape(data)
	v, err := decodeJSON(data)
	if err != nil {
		panic(err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return KindOther, true
	}
	exact = !dups && !hasFoldedKey(v)
	if m["error"] != nil || m["object"] == "error" {
		return KindError, exact
	}
	text, fffd := refText(m)
	if text && refShape(ev) {
		return KindText, exact && !fffd
	}
	return KindOther, exact
}

var inspectedKeys = []string{"choices", "usage", "error", "object", "index", "delta", "logprobs", "finish_reason", "content", "reasoning_content", "reasoning", "role"}

func hasFoldedKey(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			for _, n := range inspectedKeys {
				if k != n && strings.EqualFold(k, n) {
					return true
				}
			}
			if hasFoldedKey(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasFoldedKey(e) {
				return true
			}
		}
	}
	return false
}

// refText applies the JSON rules of a text delta to a decoded object.
func refText(m map[string]any) (ok, fffd bool) {
	chs, _ := m["choices"].([]any)
	if len(chs) != 1 || m["usage"] != nil {
		return false, false
	}
	ch, _ := chs[0].(map[string]any)
	d, _ := ch["delta"].(map[string]any)
	if d == nil {
		return false, false
	}
	for k, v := range ch {
		switch k {
		case "delta":
		case "index":
			if _, num := v.(json.Number); !num && v != nil {
				return false, false
			}
		default:
			if v != nil {
				return false, false
			}
		}
	}
	texts := 0
	for k, v := range d {
		switch k {
		case "content", "reasoning_content", "reasoning":
			if v == nil {
				continue
			}
			s, isString := v.(string)
			if !isString {
				return false, false
			}
			if s == "" {
				continue // "" counts as null
			}
			texts++
			fffd = strings.ContainsRune(s, utf8.RuneError)
		case "role":
			if _, str := v.(string); !str && v != nil {
				return false, false
			}
		default:
			if v != nil {
				return false, false
			}
		}
	}
	return texts == 1, fffd
}

// refShape applies the SSE rules of a text delta, splitting Raw into lines
// independently of Classify.
func refShape(ev *sse.Event) bool {
	if ev.Type != "" && ev.Type != "message" || ev.HasID || ev.Retry != -1 || ev.Unterminated {
		return false
	}
	raw := strings.TrimPrefix(string(ev.Raw), "\xEF\xBB\xBF")
	raw = strings.ReplaceAll(raw, "\r\n", "\n")
	raw = strings.ReplaceAll(raw, "\r", "\n")
	var lines []string
	for _, l := range strings.Split(raw, "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return len(lines) == 1 && strings.HasPrefix(lines[0], "data:")
}

// refRunes counts the text runes of a decoded chunk.
func refRunes(v any) (answer, reasoning int) {
	m, _ := v.(map[string]any)
	chs, _ := m["choices"].([]any)
	for _, ch := range chs {
		c, _ := ch.(map[string]any)
		d, _ := c["delta"].(map[string]any)
		s, _ := d["content"].(string)
		answer += utf8.RuneCountInString(s)
		for _, k := range []string{"reasoning_content", "reasoning"} {
			s, _ := d[k].(string)
			reasoning += utf8.RuneCountInString(s)
		}
	}
	return answer, reasoning
}

func TestRunesMatchEncodingJSON(t *testing.T) {
	for _, tc := range classifyCases {
		ev := oneEvent(t, tc.raw)
		checkRunes(t, &ev)
	}
}

// checkRunes compares the rune counts of Classify with encoding/json's view
// of the data, when that view is unambiguous.
func checkRunes(t *testing.T, ev *sse.Event) {
	t.Helper()
	c, _ := Classify(ev, nil)
	if !ev.HasData || ev.IsDone() {
		if c.AnswerRunes != 0 || c.ReasoningRunes != 0 {
			t.Fatalf("%q: runes without JSON", ev.Raw)
		}
		return
	}
	a, r := 0, 0
	if json.Valid(ev.Data) {
		depth, dups := jsontest.Shape(ev.Data)
		if dups {
			return
		}
		if depth <= jsonscan.MaxDepth {
			v, _ := decodeJSON(ev.Data)
			if _, isObj := v.(map[string]any); isObj {
				a, r = refRunes(v)
			}
		}
	}
	if c.AnswerRunes != a || c.ReasoningRunes != r {
		t.Fatalf("%q: runes %d/%d, encoding/json says %d/%d", ev.Data, c.AnswerRunes, c.ReasoningRunes, a, r)
	}
}

func FuzzRunes(f *testing.F) {
	for _, tc := range classifyCases {
		f.Add([]byte(tc.raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r := sse.NewReader(bytes.NewReader(raw), 1<<16)
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			checkRunes(t, &ev)
		}
	})
}

func FuzzStripReasoning(f *testing.F) {
	for _, s := range []string{openAIText, openAIN2, deepSeekR, deepSeekA, orReasonD, orReason,
		`{"choices":[{"delta":{ "reasoning" : "a" , "content" : "x" , "reasoning_content" : null }}]}`,
		`{"choices":[{"delta":{"reasoning":"a","reasoning_content":"b"}},{"delta":{"reasoning":{"x":1}}}]}`,
		`{"choices":[{"delta":{"re\u0061soning":"\ud800","x":[1]}}]}`,
		`{"choices":null}`, `[]`, `{"choices":[],"x":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, removed, ok := StripReasoning([]byte("pre"), data)
		if !bytes.HasPrefix(out, []byte("pre")) {
			t.Fatalf("dst prefix lost: %q", out)
		}
		valid := json.Valid(data)
		depth, dups := 0, false
		if valid {
			depth, dups = jsontest.Shape(data)
		}
		if !ok {
			if len(out) != 3 || removed != 0 {
				t.Fatalf("failed StripReasoning changed dst: %q", out)
			}
			if valid && depth <= jsonscan.MaxDepth && !dups {
				v, _ := decodeJSON(data)
				m, _ := v.(map[string]any)
				if _, isArr := m["choices"].([]any); isArr {
					t.Fatalf("StripReasoning(%q) refused an object with a choices array", data)
				}
			}
			return
		}
		if !valid {
			t.Fatalf("StripReasoning accepted invalid JSON %q", data)
		}
		if !json.Valid(out[3:]) {
			t.Fatalf("StripReasoning(%q) = invalid JSON %q", data, out[3:])
		}
		if !dups {
			checkStrip(t, data, out[3:], removed)
		}
	})
}

// ClassifyCount agrees with Classify on every chunk Classify finds well
// formed: the same kind for comments, done and errors, and for a text
// chunk the same channel and counts.
func FuzzClassifyCount(f *testing.F) {
	addChunkSeeds(f)
	f.Add([]byte(`{"error":{"message":"x"}}`))
	f.Add([]byte(`{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, ev := range dataEvents(data) {
			full, _ := Classify(&ev, nil)
			light, _ := ClassifyCount(&ev, nil)
			if light.Text != nil || light.Prefix != nil || light.Suffix != nil {
				t.Fatalf("ClassifyCount(%q) kept text: %+v", data, light)
			}
			switch full.Kind {
			case KindComment, KindDone, KindError:
				if light.Kind != full.Kind {
					t.Fatalf("ClassifyCount(%q) = %s, Classify %s", data, kindName(light.Kind), kindName(full.Kind))
				}
			case KindText:
				if light.Kind != KindText || light.Channel != full.Channel || light.HasRole != full.HasRole ||
					light.AnswerRunes != full.AnswerRunes || light.ReasoningRunes != full.ReasoningRunes {
					t.Fatalf("ClassifyCount(%q) = %+v, Classify %+v", data, light, full)
				}
			}
		}
	})
}

// readUsage reads a chunk as encoding/json decodes it.
func FuzzReadUsage(f *testing.F) {
	for _, s := range []string{openAIUsage, deepSeekUse, openAIText, `{"choices":[],"usage":{"a":1}}`, `{"choices":null,"usage":null}`,
		`{"Choices":[ ],"USAGE":{}}`, `{"choices":{},"usage":{}}`, `{"usage":1,"usage":null}`, `[1]`, `{"choices":[1],"usage":{}}`,
		`{"choices":[{"delta":{},"usage":{"prompt_tokens":1,"completion_tokens":2}}]}`, `{"choices":[],"x_groq":{"usage":{"prompt_tokens":1,"completion_tokens":2}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c struct {
			Choices []json.RawMessage `json:"choices"`
			Usage   json.RawMessage   `json:"usage"`
		}
		decoded := json.Unmarshal(data, &c) == nil
		ok := decoded && len(c.Usage) > 0 && string(c.Usage) != "null"
		wantDrop := ok && len(c.Choices) == 0
		want := c.Usage
		if !ok && decoded {
			// No standard usage: a provider's own, if any (never dropped).
			want, ok = usage.ProviderUsage(data)
		}
		p := NewPacer(Config{DropUsage: true})
		drop := p.readUsage(data)
		if drop != wantDrop || ok != (p.usage != nil) || ok && string(p.usage) != string(want) {
			t.Fatalf("readUsage(%q) = %v, usage %q; encoding/json: drop %v, usage %q (%v)", data, drop, p.usage, wantDrop, want, ok)
		}
	})
}
