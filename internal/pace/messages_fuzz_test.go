package pace

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzPacerMessages: random Messages streams (thinking, text, tool_use and
// redacted_thinking blocks, deltas cut at random rune offsets, pings, random
// arrival times) come out of every mode, with and without hidden
// reasoning, as a well-formed stream with each channel's text intact (the
// reasoning empty when hidden) and blocks numbered without holes.
func FuzzPacerMessages(f *testing.F) {
	f.Add("Hello, world! This is a test of the pacer.", uint64(1))
	f.Add("这是一个没有空格的中文句子，用来测试分割。👨‍👩‍👧‍👦🇯🇵👍🏽e\u0301", uint64(2))
	f.Add(strings.Repeat("QUJDREVGR0hJSktMTU5PUFFS", 20), uint64(3))
	f.Add("<b>&amp;</b>\n\t\"quoted\" \\ back\u2028slash\u0000", uint64(4))
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		if !utf8.ValidString(text) || text == "" || len(text) > 4096 {
			t.Skip()
		}
		arrs, want, wantBlocks, wantShown := randomMessages(t, text, seed)
		for _, hide := range []bool{false, true} {
			for _, m := range modes {
				cfg := Config{Mode: m, Format: FormatMessages, HideReasoning: hide}.withDefaults()
				ems, p := simulate(t, cfg, arrs)
				v := viewMessages(t, emitted(ems))
				wantR, blocks := want[1].String(), wantBlocks
				if hide {
					wantR, blocks = "", wantShown
				}
				if got := v.text[0].String(); got != want[0].String() {
					t.Fatalf("%s hide=%v: answer\ngot  %q\nwant %q", m, hide, got, want[0].String())
				}
				if got := v.text[1].String(); got != wantR {
					t.Fatalf("%s hide=%v: reasoning\ngot  %q\nwant %q", m, hide, got, wantR)
				}
				if len(v.starts) != blocks || v.last != "message_stop" {
					t.Fatalf("%s hide=%v: %d blocks, want %d; last event %s", m, hide, len(v.starts), blocks, v.last)
				}
				if hide && p.Stats().HiddenRunes != utf8.RuneCountInString(want[1].String()) {
					t.Fatalf("%s: %d runes hidden of %d", m, p.Stats().HiddenRunes, utf8.RuneCountInString(want[1].String()))
				}
				if string(p.Stats().Usage) != rsUsageWant {
					t.Fatalf("%s: usage %s", m, p.Stats().Usage)
				}
				in, out := messagesTimes(t, arrs, ems)
				if l := maxLag(in, out); l > max(cfg.MaxDelay, cfg.ReasoningMaxDelay) {
					t.Fatalf("%s hide=%v: text held %v", m, hide, l)
				}
			}
		}
	})
}

// messagesTimes lists, rune by rune, when the text of all channels came
// in and went out (only the runes that went out count on both sides).
func messagesTimes(t *testing.T, arrs []arrival, ems []emission) (in, out []time.Duration) {
	for _, e := range ems {
		for _, ev := range readEvents(t, string(e.raw)) {
			if c, _ := ClassifyMessages(&ev, nil); c.Kind == KindText {
				for range utf8.RuneCount(c.Text) {
					out = append(out, e.at)
				}
			}
		}
	}
	// Output order per channel equals input order, but channels may
	// interleave differently; the lag bound per rune still holds when
	// both lists are sorted by time, as the pacer never reorders within
	// a lane and ModePace shares one lane.
	for _, a := range arrs {
		if c, _ := ClassifyMessages(&a.ev, nil); c.Kind == KindText {
			for range utf8.RuneCount(c.Text) {
				in = append(in, a.at)
			}
		}
	}
	if len(in) != len(out) {
		return nil, nil // hidden reasoning: the lists do not pair up
	}
	return in, out
}

// randomMessages builds a random Messages stream carrying text, and
// returns it with its answer and reasoning, its number of blocks and of
// blocks that are not thinking.
func randomMessages(t testing.TB, text string, seed uint64) (arrs []arrival, want [2]strings.Builder, wantBlocks, wantShown int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	runes := []rune(text)
	at := time.Duration(0)
	add := func(data string) {
		if rng.IntN(3) == 0 {
			at += time.Duration(rng.IntN(900)) * time.Millisecond
		}
		arrs = append(arrs, msgArr(t, at, data))
		if rng.IntN(10) == 0 {
			arrs = append(arrs, msgArr(t, at, amPing))
		}
	}
	add(amStart)
	idx := 0
	for i := 0; i < len(runes); idx++ {
		kind := []string{"thinking", "text", "text", "tool_use", "redacted_thinking"}[rng.IntN(5)]
		add(mbStart(idx, kind))
		wantBlocks++
		if kind == "text" || kind == "tool_use" {
			wantShown++
		}
		for j := rng.IntN(6); j >= 0 && i < len(runes); j-- {
			n := 1 + rng.IntN(min(len(runes)-i, 1+rng.IntN(64)))
			piece := string(runes[i : i+n])
			switch kind {
			case "thinking":
				i += n
				add(mbThink(idx, piece))
				want[1].WriteString(piece)
			case "text":
				i += n
				add(mbText(idx, piece))
				want[0].WriteString(piece)
			case "tool_use":
				add(mbJSON(idx))
			default:
				i++ // no deltas in a redacted block
			}
		}
		if kind == "thinking" {
			add(mbSig(idx))
		}
		add(mbStop(idx))
	}
	add(amMsgDelta)
	// Nothing after message_stop: the stream ends there.
	arrs = append(arrs, msgArr(t, at, amMsgStop))

	return arrs, want, wantBlocks, wantShown
}
