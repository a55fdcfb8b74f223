package gemini

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat/chattest"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// genGemini builds a Gemini stream from fuzz input, and what it carries:
// thought and text parts split over chunks, function calls (with and
// without ids and signatures) whose args are arbitrary JSON objects,
// running usage, a finishReason or a cut end.
func genGemini(data []byte) (stream string, text, thought string, calls []functionCall, sigs []string, finished bool) {
	in := chattest.NewInput(data)
	var b strings.Builder
	emit := func(parts []part, finish string) {
		r := generateResponse{Candidates: []candidate{{Content: &content{Role: "model", Parts: parts}, FinishReason: finish}},
			UsageMetadata: &UsageMetadata{PromptTokenCount: 9, CandidatesTokenCount: len(text)}, ModelVersion: "gemini-x", ResponseID: "r"}
		b.WriteString("data: " + string(marshal(r)) + "\r\n\r\n")
	}
	words := []string{"a", " b", "\"q\"", "\n", "é", "<x>", "\\", "\u2028", " 42"}
	for range in.N(12) {
		var parts []part
		for range 1 + in.N(3) {
			switch in.N(4) {
			case 0:
				s := words[in.N(len(words))]
				thought += s
				parts = append(parts, part{Thought: true, Text: &s})
			case 1, 2:
				s := words[in.N(len(words))] + words[in.N(len(words))]
				text += s
				parts = append(parts, part{Text: &s})
			default:
				c := functionCall{Name: fmt.Sprintf("fn_%d", in.N(3)), Args: genArgs(in)}
				if in.N(2) == 0 {
					c.ID = fmt.Sprintf("id-%d", len(calls))
				}
				sig := ""
				if in.N(2) == 0 {
					sig = b64([]byte{byte(in.N(256)), byte(in.N(256)), byte(in.N(256)), byte(in.N(256))}[:1+in.N(4)])
				}
				calls, sigs = append(calls, c), append(sigs, sig)
				parts = append(parts, part{FunctionCall: &c, ThoughtSignature: sig})
			}
		}
		emit(parts, "")
	}
	if in.N(4) != 0 {
		e := ""
		emit([]part{{Text: &e}}, []string{"STOP", "MAX_TOKENS", "SAFETY"}[in.N(3)])
		finished = true
	}
	return b.String(), text, thought, calls, sigs, finished
}

// genArgs is a JSON object of any depth and content.
func genArgs(in *chattest.Input) json.RawMessage {
	var val func(depth int) any
	val = func(depth int) any {
		switch k := in.N(7); {
		case k == 0 && depth < 3:
			m := map[string]any{}
			for i := range in.N(4) {
				m[fmt.Sprintf("k%d\"\\%d", i, in.N(9))] = val(depth + 1)
			}
			return m
		case k == 1 && depth < 3:
			a := []any{}
			for range in.N(4) {
				a = append(a, val(depth+1))
			}
			return a
		case k == 2:
			return in.N(1000) - 500
		case k == 3:
			return float64(in.N(1000)) / 8
		case k == 4:
			return in.N(2) == 0
		case k == 5:
			return nil
		default:
			return strings.Repeat("x\n\"é", in.N(4))
		}
	}
	m := map[string]any{}
	for i := range in.N(5) {
		m[fmt.Sprintf("arg%d", i)] = val(0)
	}
	return marshal(m)
}

// FuzzToChatStreamFaithful is the tool-call argument preservation
// property, and the rest of the answer: a Gemini stream translated to
// Chat carries the same text, reasoning, and every call with its args
// (as JSON values), its name and its signature; and back to Gemini
// through FromChatStream, the same again.
func FuzzToChatStreamFaithful(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		stream, text, thought, calls, sigs, finished := genGemini(data)
		a, err := readChat(t, ToChatStream(reader(stream), chat.Options{IncludeUsage: true}))
		if err != nil {
			t.Fatalf("%v\n%s", err, stream)
		}
		if a.done != finished || a.content != text || a.reasoning != thought || len(a.calls) != len(calls) {
			t.Fatalf("done %v content %q reasoning %q calls %d; want %v %q %q %d\n%s", a.done, a.content, a.reasoning, len(a.calls), finished, text, thought, len(calls), stream)
		}
		for i, c := range calls {
			g := a.calls[i]
			base, sig := SplitCallID(g.ID)
			if g.Function.Name != c.Name || !jsonEqual(g.Function.Arguments, string(c.Args)) || sig != sigs[i] || c.ID != "" && base != c.ID {
				t.Fatalf("call %d: %+v, want %+v sig %q\n%s", i, g, c, sigs[i], stream)
			}
		}
		back, err := readGemini(t, FromChatStream(ToChatStream(reader(stream), chat.Options{IncludeUsage: true}), chat.Options{}))
		if err != nil {
			t.Fatal(err)
		}
		if (back.end == "finish") != finished || back.text != text || back.thought != thought {
			t.Fatalf("back: %+v\n%s", back, stream)
		}
		if !finished {
			// FromChatStream writes the calls whole at the end: a cut
			// stream has none, and the client sees it cut.
			if len(back.calls) != 0 {
				t.Fatalf("calls in a cut stream: %+v", back.calls)
			}
			return
		}
		if len(back.calls) != len(calls) {
			t.Fatalf("back: %d calls, want %d\n%s", len(back.calls), len(calls), stream)
		}
		for i, c := range calls {
			g := back.calls[i]
			if g.Name != c.Name || !jsonEqual(string(g.Args), string(c.Args)) || back.sigs[i] != sigs[i] || c.ID != "" && g.ID != c.ID {
				t.Fatalf("back call %d: %+v sig %q, want %+v sig %q", i, g, back.sigs[i], c, sigs[i])
			}
		}
	})
}

// TestArgsPreservedProperty runs the property over many generated
// streams, in every test run (the fuzz target runs only its seeds).
func TestArgsPreservedProperty(t *testing.T) {
	total := 0
	f := func(seed []byte) {
		t.Run("", func(t *testing.T) {
			stream, _, _, calls, _, _ := genGemini(seed)
			total += len(calls)
			a, err := readChat(t, ToChatStream(reader(stream), chat.Options{}))
			if err != nil {
				t.Fatal(err)
			}
			if len(a.calls) != len(calls) {
				t.Fatalf("%d calls, want %d", len(a.calls), len(calls))
			}
			for i, c := range calls {
				if !jsonEqual(a.calls[i].Function.Arguments, string(c.Args)) {
					t.Fatalf("args %s, want %s", a.calls[i].Function.Arguments, c.Args)
				}
			}
			// And through a request: the history a client sends back.
			req := generateRequest{Contents: []content{{Role: "model"}}}
			for i := range calls {
				req.Contents[0].Parts = append(req.Contents[0].Parts, part{FunctionCall: &calls[i]})
			}
			if len(calls) == 0 {
				return
			}
			c, err := ToChatRequest(marshal(req), chat.Options{})
			if err != nil {
				t.Fatal(err)
			}
			back, err := FromChatRequest(c, chat.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got generateRequest
			if err := json.Unmarshal(back, &got); err != nil {
				t.Fatal(err)
			}
			for i, c := range calls {
				if g := got.Contents[0].Parts[i].FunctionCall; g == nil || !jsonEqual(string(g.Args), string(c.Args)) {
					t.Fatalf("request call %d: %+v, want args %s", i, g, c.Args)
				}
			}
		})
	}
	for i := range 300 {
		seed := make([]byte, 64)
		for j := range seed {
			seed[j] = byte((i*131 + j*17 + i*j) % 251)
		}
		f(seed)
	}
	if total < 100 {
		t.Fatalf("the generator made %d calls in all: the property was hardly tested", total)
	}
}

// genRequest builds a Gemini request history from fuzz input: user text
// and images, model text, thoughts and calls (with and without ids and
// signatures, args of any shape), and the responses to every call, in
// any order, by id or by name.
func genRequest(data []byte) generateRequest {
	in := chattest.NewInput(data)
	words := []string{"a", " b", "\"q\"", "\n", "é", "<x>", "\\", " 42"}
	txt := func() *string { s := words[in.N(len(words))] + words[in.N(len(words))]; return &s }
	r := generateRequest{Contents: []content{}}
	if in.N(2) == 0 {
		r.SystemInstruction = &content{Parts: []part{{Text: txt()}}}
	}
	for range 1 + in.N(5) {
		u := content{Role: "user", Parts: []part{{Text: txt()}}}
		if in.N(3) == 0 {
			u.Parts = append(u.Parts, part{InlineData: &blob{MimeType: "image/png", Data: "iVBORw0K"}})
		}
		r.Contents = append(r.Contents, u)
		m := content{Role: "model"}
		if in.N(2) == 0 {
			m.Parts = append(m.Parts, part{Thought: true, Text: txt()})
		}
		if in.N(2) == 0 {
			m.Parts = append(m.Parts, part{Text: txt()})
		}
		var calls []functionCall
		for k := range in.N(4) {
			c := functionCall{Name: fmt.Sprintf("fn_%d", in.N(3)), Args: genArgs(in)}
			if in.N(2) == 0 {
				c.ID = fmt.Sprintf("id-%d-%d", len(r.Contents), k)
			}
			sig := ""
			if in.N(2) == 0 {
				sig = b64([]byte{byte(in.N(256)), byte(in.N(256))}[:1+in.N(2)])
			}
			calls = append(calls, c)
			m.Parts = append(m.Parts, part{FunctionCall: &calls[len(calls)-1], ThoughtSignature: sig})
		}
		if len(m.Parts) == 0 {
			m.Parts = append(m.Parts, part{Text: txt()})
		}
		r.Contents = append(r.Contents, m)
		if len(calls) > 0 {
			resp := content{Role: "user"}
			for _, c := range calls {
				fr := &functionResponse{ID: c.ID, Name: c.Name, Response: marshal(map[string]any{"output": *txt()})}
				if in.N(3) == 0 {
					fr.Response = marshal(map[string]any{"result": *txt(), "n": in.N(9)})
				}
				resp.Parts = append(resp.Parts, part{FunctionResponse: fr})
			}
			r.Contents = append(r.Contents, resp)
		}
	}
	return r
}

// FuzzRequestRoundTrip: a Gemini history through Chat and back (what a
// Gemini client's request becomes on its way to a Gemini target through
// the pivot) keeps every turn's text, images, calls (name, args as JSON
// values, signature) and responses (name, response), in order; only
// thoughts (which no Chat provider takes back) and the ids (which Gemini
// does not need) are gone.
func FuzzRequestRoundTrip(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := genRequest(data)
		c, err := ToChatRequest(marshal(req), chat.Options{Model: "m"})
		if err != nil {
			t.Fatalf("%v\n%s", err, marshal(req))
		}
		back, err := FromChatRequest(c, chat.Options{})
		if err != nil {
			t.Fatalf("%v\n%s", err, c)
		}
		var got generateRequest
		if err := json.Unmarshal(back, &got); err != nil {
			t.Fatal(err)
		}
		// What must come back: every part but thoughts, ids cleared.
		var want []content
		for _, ct := range req.Contents {
			w := content{Role: ct.Role}
			for _, p := range ct.Parts {
				switch {
				case p.Thought:
					continue
				case p.FunctionCall != nil:
					fc := *p.FunctionCall
					fc.ID = ""
					p.FunctionCall = &fc
				case p.FunctionResponse != nil:
					fr := *p.FunctionResponse
					fr.ID = ""
					p.FunctionResponse = &fr
				}
				w.Parts = append(w.Parts, p)
			}
			if len(w.Parts) == 0 {
				continue // a turn of thoughts only vanishes, and its neighbours meet
			}
			if n := len(want); n > 0 && want[n-1].Role == w.Role {
				want[n-1].Parts = append(want[n-1].Parts, w.Parts...)
			} else {
				want = append(want, w)
			}
		}
		// Chat puts a turn's tool results before the rest of that turn,
		// and joins a model turn's texts: compare the parts by kind.
		flat := func(cs []content) (texts, calls, resps, images []string) {
			for _, ct := range cs {
				var text strings.Builder
				for _, p := range ct.Parts {
					switch {
					case p.FunctionCall != nil:
						calls = append(calls, p.FunctionCall.Name+" "+string(compactJSON(p.FunctionCall.Args))+" "+p.ThoughtSignature)
					case p.FunctionResponse != nil:
						resps = append(resps, p.FunctionResponse.Name+" "+canon(p.FunctionResponse.Response))
					case p.InlineData != nil:
						images = append(images, p.InlineData.MimeType+p.InlineData.Data)
					case p.Text != nil:
						text.WriteString(*p.Text)
					}
				}
				texts = append(texts, ct.Role+": "+text.String())
			}
			return
		}
		wt, wc, wr, wi := flat(want)
		gt, gc, gr, gi := flat(got.Contents)
		for _, pair := range [][2][]string{{wt, gt}, {wc, gc}, {wr, gr}, {wi, gi}} {
			if strings.Join(pair[0], "\n") != strings.Join(pair[1], "\n") {
				t.Fatalf("got\n%s\nwant\n%s\nrequest %s\nback %s", strings.Join(pair[1], "\n"), strings.Join(pair[0], "\n"), marshal(req), back)
			}
		}
		if len(wt) != len(gt) {
			t.Fatalf("%d turns, want %d:\n%q\n%q", len(gt), len(wt), gt, wt)
		}
		if req.SystemInstruction != nil && (got.SystemInstruction == nil || *got.SystemInstruction.Parts[0].Text != *req.SystemInstruction.Parts[0].Text) {
			t.Fatalf("system %s", back)
		}
	})
}

// canon is a JSON value re-encoded, keys sorted.
func canon(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// FuzzStripSignatures: the history of a generated Gemini request, in
// Chat, without its signatures: no id carries one, every tool message
// still answers a call, and the calls' arguments are untouched.
func FuzzStripSignatures(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ToChatRequest(marshal(genRequest(data)), chat.Options{Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		read := func(b []byte) (calls map[string]string, results []string) {
			var r struct {
				Messages []struct {
					ToolCallID string          `json:"tool_call_id"`
					ToolCalls  []chat.ToolCall `json:"tool_calls"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			calls = map[string]string{}
			for _, m := range r.Messages {
				for _, tc := range m.ToolCalls {
					calls[tc.ID] = tc.Function.Arguments
				}
				if m.ToolCallID != "" {
					results = append(results, m.ToolCallID)
				}
			}
			return calls, results
		}
		before, _ := read(c)
		s := StripSignatures(c)
		after, results := read(s)
		if strings.Contains(string(s), sigSep) || len(after) != len(before) {
			t.Fatalf("%s", s)
		}
		for id, args := range before {
			base, _ := SplitCallID(id)
			if after[base] != args {
				t.Fatalf("call %q: args %q, want %q", base, after[base], args)
			}
		}
		for _, id := range results {
			if _, ok := after[id]; !ok {
				t.Fatalf("a tool message answers %q, which no call has: %s", id, s)
			}
		}
	})
}
