package splice

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// rspSynthetic is a reasoning, a message, a function call and a custom
// tool call (Codex CLI's apply_patch), texts in rsp_pieces of 4 runes.
func rspSynthetic() []sse.Event {
	return rspBuild("resp_orig", []rspItem{
		{typ: "reasoning", id: "rs_1", text: "First I think about the question, then about the answer."},
		{typ: "message", id: "msg_1", text: "The answer is forty-two, because six times seven is forty-two. Héllo wörld ✓ done.\n\nBye "},
		{typ: "function_call", id: "fc_1", name: "calculator", text: `{"a":6,"b":7,"op":"multiply"}`},
		{typ: "custom_tool_call", id: "ct_1", name: "apply_patch", text: "*** Begin Patch\n*** End Patch\n"},
	}, 4)
}

const contReasoning = "Thinking again on the other model."

// rspContinuation is what a next target would send: its own reasoning,
// the rest of the answer (after lead, text it repeats), the tool calls.
func rspContinuation(orig *rspView, answer, lead, id string) []sse.Event {
	rest := strings.TrimPrefix(orig.text(), answer)
	items := []rspItem{{typ: "reasoning", id: "rs_" + id, text: contReasoning + id}}
	if lead+rest != "" {
		items = append(items, rspItem{typ: "message", id: "msg_" + id, text: lead + rest})
	}
	for i, c := range orig.calls() {
		items = append(items, rspItem{typ: c.typ, id: fmt.Sprintf("fc_%s_%d", id, i), text: c.args, name: c.name})
	}
	return rspBuild("resp_"+id, items, 3)
}

// tailRunes is the last n runes of s.
func tailRunes(s string, n int) string {
	i := len(s)
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}

func rspStreams(t *testing.T) map[string][]sse.Event {
	streams := rspRecordings(t)
	streams["synthetic"] = rspSynthetic()
	// The same without event: lines (the data's type is what counts).
	var bare []sse.Event
	for _, e := range rspSynthetic() {
		bare = append(bare, sse.NewEvent("", e.Data))
	}
	streams["synthetic, no event lines"] = bare
	return streams
}

// TestResponsesSpliceProperty breaks each stream (the real recordings and
// a synthetic reasoning + message + tool calls one) before every event,
// continues it with the rest of the answer, and reads what the client got
// as the SDKs do: the text is the original's exactly, the stream valid
// (see viewStream), the tool calls the original's. A second break in the
// continuation, continued again, gives the same. With a 20-rune repeat at
// the seam (default MaxOverlap), still exact.
func TestResponsesSpliceProperty(t *testing.T) {
	for name, orig := range rspStreams(t) {
		ov, err := viewStream(orig)
		if err != nil {
			t.Fatalf("%s: the original: %v", name, err)
		}
		want := ov.text()
		runs := 0
		conts := map[[3]string][]sse.Event{}
		contOf := func(answer, lead, id string) []sse.Event {
			key := [3]string{answer, lead, id}
			if c, ok := conts[key]; ok {
				return c
			}
			c := rspContinuation(ov, answer, lead, id)
			conts[key] = c
			return c
		}
		for k := range orig {
			for _, repeat := range []bool{false, true} {
				label := fmt.Sprintf("%s, break before event %d, repeat %v", name, k, repeat)
				rec := NewRecorder(Responses, 1<<20)
				client := passAll(rec, orig[:k])
				seam := rec.Seam()
				if !strings.HasPrefix(want, seam.Answer) {
					t.Fatalf("%s: seam answer %q is not a prefix of %q", label, seam.Answer, want)
				}
				o := Options{MaxOverlap: -1, Comment: "continued", Earlier: earlier}
				lead := ""
				if repeat {
					if utf8.RuneCountInString(seam.Answer) < 20 {
						continue
					}
					lead, o.MaxOverlap = tailRunes(seam.Answer, 20), 0
				}
				cont := contOf(seam.Answer, lead, "c1")
				full := append(client, spliceAll(rec, seam.Splicer(o), cont)...)
				checkSpliced(t, label, ov, seam, "c1", full)
				runs++

				// A second break in the continuation, at every other of
				// its events (every fourth, for the recordings; every
				// sixth with -short or -race).
				for j := 0; j < len(cont) && !repeat; j++ {
					if name != "synthetic" && j%4 != 0 || j%2 != 0 || (testing.Short() || rspRace) && j%6 != 0 {
						continue
					}
					label2 := fmt.Sprintf("%s, second break before event %d", label, j)
					rec := NewRecorder(Responses, 1<<20)
					client := passAll(rec, orig[:k])
					seam := rec.Seam()
					client = append(client, spliceAll(rec, seam.Splicer(o), cont[:j])...)
					seam2 := rec.Seam()
					if !strings.HasPrefix(want, seam2.Answer) || len(seam2.Answer) < len(seam.Answer) {
						t.Fatalf("%s: second seam answer %q (first %q), want a prefix of %q", label2, seam2.Answer, seam.Answer, want)
					}
					cont2 := contOf(seam2.Answer, "", "c2")
					full := append(client, spliceAll(rec, seam2.Splicer(o), cont2)...)
					checkSpliced(t, label2, ov, seam2, "c2", full)
					runs++
				}
			}
		}
		t.Logf("%s: %d events, %d splices", name, len(orig), runs)
	}
}

// checkSpliced checks what the client got against the original.
// id is the last continuation's.
func checkSpliced(t *testing.T, label string, orig *rspView, seam *Seam, id string, got []sse.Event) {
	t.Helper()
	v, err := viewStream(got)
	if err != nil {
		t.Fatalf("%s: %v\n%s", label, err, rsp_dump(got))
	}
	if v.text() != orig.text() {
		t.Fatalf("%s: text\n%q, want\n%q\n%s", label, v.text(), orig.text(), rsp_dump(got))
	}
	var final strings.Builder
	for _, it := range list(v.final["output"]) {
		m := it.(map[string]any)
		if m["type"] == "message" {
			for _, c := range list(m["content"]) {
				s, _ := c.(map[string]any)["text"].(string)
				final.WriteString(s)
			}
		}
	}
	if final.String() != orig.text() {
		t.Fatalf("%s: the final response's text %q, want %q", label, final.String(), orig.text())
	}
	if id, want := v.final["id"], v.createdID; id != want {
		t.Fatalf("%s: response id %v, want %v", label, id, want)
	}
	gc, wc := v.calls(), orig.calls()
	if len(gc) != len(wc) {
		t.Fatalf("%s: %d tool calls, want %d", label, len(gc), len(wc))
	}
	for i := range gc {
		if gc[i].typ != wc[i].typ || gc[i].name != wc[i].name || !jsonEqual(gc[i].args, wc[i].args) {
			t.Fatalf("%s: call %d = %+v, want %+v", label, i, gc[i], wc[i])
		}
	}
	hasCont := strings.Contains(v.reasoning, contReasoning+id)
	switch {
	case seam.InReasoning:
		if !strings.Contains(v.reasoning, Marker) || !hasCont {
			t.Fatalf("%s: broke in the reasoning, the client's reasoning %q has no marker and new reasoning", label, v.reasoning)
		}
	case seam.Answer != "":
		if hasCont {
			t.Fatalf("%s: the continuation's reasoning shown after the answer began", label)
		}
	}
}

func rsp_dump(evs []sse.Event) string {
	var b strings.Builder
	for _, e := range evs {
		s := string(e.Raw)
		if len(s) > 400 {
			s = s[:400] + "...\n\n"
		}
		b.WriteString(s)
	}
	return b.String()
}

var earlier = usage.Usage{Prompt: 100, Completion: 7, Reasoning: 3, Cached: 50}
