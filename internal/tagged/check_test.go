package tagged

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// The checks every rewritten stream must pass, whatever its text: the
// property test, the fuzz target and the corpus share them.

// inEvent is one event of an upstream stream, as the checks see it.
type inEvent struct {
	raw, data []byte
	text      bool // choice 0 carries content text
	finish    bool // choice 0 carries a finish_reason
}

// readAll parses a stream into its events (copied).
func readAll(t testing.TB, stream string) []inEvent {
	t.Helper()
	rd := sse.NewReader(strings.NewReader(stream), 0)
	var evs []inEvent
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatalf("reading the stream back: %v", err)
		}
		in := inEvent{raw: bytes.Clone(ev.Raw), data: bytes.Clone(ev.Data)}
		in.text, in.finish = choiceZeroParts(ev.Data)
		evs = append(evs, in)
	}
}

// choiceZeroParts reports whether choice 0 of a chunk carries content
// text, and a finish_reason.
func choiceZeroParts(data []byte) (text, finish bool) {
	var top struct {
		Choices []struct {
			Index  *int            `json:"index"`
			Delta  json.RawMessage `json:"delta"`
			Finish json.RawMessage `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &top) != nil {
		return false, false
	}
	for _, ch := range top.Choices {
		if ch.Index != nil && *ch.Index != 0 {
			continue
		}
		var d struct {
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(ch.Delta, &d)
		text = len(d.Content) > 2 && d.Content[0] == '"'
		finish = len(ch.Finish) > 0 && string(ch.Finish) != "null"
		return text, finish
	}
	return false, false
}

// members is the top-level members of a JSON object but choices and
// usage, as raw bytes in order ("" when data is not an object).
func members(data []byte) string {
	it := jsonscan.NewObjIter(data, jsonscan.SkipWS(data, 0), 1)
	var b strings.Builder
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		it.Skip()
		if it.Err {
			return ""
		}
		if jsonscan.KeyIs(data[ks:ke], "choices") || jsonscan.KeyIs(data[ks:ke], "usage") {
			continue
		}
		b.Write(data[ks:it.Pos])
		b.WriteByte('\n')
		_ = vs
	}
	if it.Err {
		return ""
	}
	return b.String()
}

// got is what a rewritten stream carried.
type got struct {
	content, reasoning, other []byte
	state                     thinktag.State
	err                       error
}

// checkStream runs stream through a Source and checks what comes out
// against the rules that hold for any text; it returns what it carried.
func checkStream(t testing.TB, stream string, syn *thinktag.Syntax, field string) got {
	t.Helper()
	in := readAll(t, stream)
	out, src, err := runSource(t, stream, syn, field)
	if err != io.EOF {
		t.Fatalf("the stream ended with %v, want io.EOF", err)
	}
	g := got{state: src.State(), err: err}

	// Valid SSE: the bytes read back give the same events.
	back := readAll(t, rawOut(out))
	if len(back) != len(out) {
		t.Fatalf("%d events out, %d when read back:\n%s", len(out), len(back), rawOut(out))
	}
	inRaw := map[string]bool{}
	envs := map[string]bool{}
	for _, ev := range in {
		inRaw[string(ev.raw)] = true
		envs[members(ev.data)] = true
	}
	var tx texts
	finished := false
	for i, ev := range out {
		if !bytes.Equal(back[i].data, ev.data) {
			t.Fatalf("event %d: data %q, read back %q", i, ev.data, back[i].data)
		}
		if !bytes.HasSuffix(ev.raw, []byte("\n\n")) && i < len(out)-1 {
			t.Fatalf("event %d is not terminated: %q", i, ev.raw)
		}
		same := inRaw[string(ev.raw)]
		if !same {
			// A new event: JSON, in the envelope of an upstream event.
			if !json.Valid(ev.data) {
				t.Fatalf("event %d is not JSON: %q", i, ev.data)
			}
			if !envs[members(ev.data)] {
				t.Fatalf("event %d's members are none of the upstream's: %s", i, ev.data)
			}
		}
		if ev.done && i != len(out)-1 {
			t.Fatalf("[DONE] is event %d of %d", i, len(out))
		}
		before := len(tx.content) + len(tx.reasoning)
		if err := choiceTexts(ev.data, field, &tx); err != nil && !same {
			t.Fatalf("event %d: %v: %q", i, err, ev.data)
		}
		if finished && len(tx.content)+len(tx.reasoning) > before {
			t.Fatalf("event %d carries text after the finish: %s", i, ev.data)
		}
		if _, fin := choiceZeroParts(ev.data); fin {
			finished = true
		}
	}

	// Order: the upstream events that carry no text of choice 0 come
	// out as they were, in their order.
	j := 0
	for _, ev := range in {
		if ev.text {
			continue
		}
		for j < len(out) && !bytes.Equal(out[j].raw, ev.raw) {
			j++
		}
		if j == len(out) {
			t.Fatalf("the upstream event %q is missing or out of order", ev.raw)
		}
		j++
	}
	g.content, g.reasoning, g.other = tx.content, tx.reasoning, tx.other
	return g
}

// checkSplit checks what a stream carried against thinktag.Split of its
// whole text.
func checkSplit(t testing.TB, g got, syn *thinktag.Syntax, text []byte) {
	t.Helper()
	r, a, st := thinktag.Split(syn, text)
	if !bytes.Equal(g.reasoning, r) || !bytes.Equal(g.content, a) {
		t.Fatalf("text %q:\n got reasoning %q\n     answer    %q\nwant reasoning %q\n     answer    %q",
			text, g.reasoning, g.content, r, a)
	}
	if len(text) == 0 {
		// No text: no block, even the implicit one of StartsInReasoning
		// (Split's parser starts in it).
		st = thinktag.State{}
	}
	if g.state.Blocks != st.Blocks || g.state.Unclosed != st.Unclosed || g.state.Reasoning {
		t.Fatalf("text %q: state %+v, want %+v", text, g.state, st)
	}
}
