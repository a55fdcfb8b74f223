package pace

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzPacerResponses: random Responses streams (answer, reasoning and
// summary deltas cut at random rune offsets, with or without obfuscation,
// the number before or after the text, function call argument deltas,
// random arrival times, a random first sequence number) come out of every
// mode, with and without hidden reasoning, with each channel's text
// intact (the reasoning empty when hidden), sequence numbers counting up
// by one from the first, and response.completed last.
func FuzzPacerResponses(f *testing.F) {
	f.Add("Hello, world! This is a test of the pacer.", uint64(1))
	f.Add("这是一个没有空格的中文句子，用来测试分割。👨‍👩‍👧‍👦🇯🇵👍🏽e\u0301", uint64(2))
	f.Add(strings.Repeat("QUJDREVGR0hJSktMTU5PUFFS", 20), uint64(3))
	f.Add("<b>&amp;</b>\n\t\"quoted\" \\ back\u2028slash\u0000", uint64(4))
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		if !utf8.ValidString(text) || text == "" || len(text) > 4096 {
			t.Skip()
		}
		arrs, want, first := randomResponses(t, text, seed)
		for _, hide := range []bool{false, true} {
			for _, m := range modes {
				cfg := Config{Mode: m, Format: FormatResponses, HideReasoning: hide}.withDefaults()
				ems, p := simulate(t, cfg, arrs)
				v := viewResponses(t, emitted(ems))
				wantR := want[1]
				if hide {
					wantR = ""
				}
				if got := v.text[0].String(); got != want[0] {
					t.Fatalf("%s hide=%v: answer\ngot  %q\nwant %q", m, hide, got, want[0])
				}
				if got := v.text[1].String(); got != wantR {
					t.Fatalf("%s hide=%v: reasoning\ngot  %q\nwant %q", m, hide, got, wantR)
				}
				checkSeqs(t, m.String(), v.seqs, first)
				if v.types[len(v.types)-1] != "response.completed" {
					t.Fatalf("%s hide=%v: last event %s", m, hide, v.types[len(v.types)-1])
				}
				if hide && p.Stats().HiddenRunes != utf8.RuneCountInString(want[1]) {
					t.Fatalf("%s: %d runes hidden of %d", m, p.Stats().HiddenRunes, utf8.RuneCountInString(want[1]))
				}
				if string(p.Stats().Usage) != rxUsage {
					t.Fatalf("%s: usage %s", m, p.Stats().Usage)
				}
			}
		}
	})
}

// randomResponses builds a random Responses stream carrying text, and
// returns it with its answer and reasoning and its first sequence number.
func randomResponses(t testing.TB, text string, seed uint64) (arrs []arrival, want [2]string, first int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	runes := []rune(text)
	first = rng.IntN(3) * rng.IntN(1000)
	s := &rxStream{t: t, seq: first}
	at := time.Duration(0)
	step := func() time.Duration {
		if rng.IntN(3) == 0 {
			at += time.Duration(rng.IntN(900)) * time.Millisecond
		}
		return at
	}
	var w [2]strings.Builder
	s.add(step(), "response.created", `,"response":{"usage":null}`)
	obfuscate := rng.IntN(2) == 0
	for i := 0; i < len(runes); {
		n := 1 + rng.IntN(min(len(runes)-i, 1+rng.IntN(64)))
		piece := string(runes[i : i+n])
		i += n
		lit := string(AppendString(nil, []byte(piece)))
		typ := []string{"response.output_text.delta", "response.reasoning_text.delta", "response.reasoning_summary_text.delta", "args"}[rng.IntN(4)]
		switch {
		case typ == "args":
			s.add(step(), "response.function_call_arguments.delta", `,"item_id":"fc","output_index":2,"delta":`+lit)
			continue
		case typ == "response.output_text.delta":
			w[0].WriteString(piece)
		default:
			w[1].WriteString(piece)
		}
		extra := ""
		if obfuscate {
			extra = `,"obfuscation":"` + strings.Repeat("x", rng.IntN(8)) + `"`
		}
		if rng.IntN(4) == 0 {
			// The number after the text.
			data := `{"type":"` + typ + `","item_id":"i","output_index":0,"delta":` + lit + extra + `,"sequence_number":` + itoa(s.seq) + `}`
			s.seq++
			s.arrs = append(s.arrs, arrival{at: step(), ev: oneEvent(t, rx(data))})
			continue
		}
		s.add(step(), typ, `,"item_id":"i","output_index":0,"delta":`+lit+extra)
		if rng.IntN(8) == 0 {
			s.add(at, "response.reasoning_summary_text.done", `,"item_id":"i","output_index":0,"text":"x"`)
		}
	}
	s.add(step(), "response.completed", `,"response":{"status":"completed","usage":`+rxUsage+`}`)
	return s.arrs, [2]string{w[0].String(), w[1].String()}, first
}
