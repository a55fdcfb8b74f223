package sim

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/handoff"
)

// contCfg is the config of the continuation tests: both sides of a
// continuation run it, as two targets of a relay's chain would.
var contCfg = Config{Seed: 11, ReasoningTokens: new(12), ContentTokens: new(40), ReasoningPattern: fast, ContentPattern: fast}

// cutPoint is a place the answer so far may end at.
type cutPoint struct {
	name string
	at   int // byte offset into the answer
}

// cutPoints returns byte offsets into the answer made of pieces: after
// its first rune, inside a word, right after a space, at a piece
// boundary, inside an emoji ZWJ sequence (a rune boundary inside a
// grapheme), before the last rune, and at its end. It fails the test
// when the text lacks one of them (change the seed).
func cutPoints(t *testing.T, pieces []string) []cutPoint {
	t.Helper()
	full := strings.Join(pieces, "")
	_, first := utf8.DecodeRuneInString(full)
	_, last := utf8.DecodeLastRuneInString(full)
	cuts := []cutPoint{{"first rune", first}, {"all but the last rune", len(full) - last}, {"all", len(full)}}
	found := map[string]bool{}
	off := 0
	for i, p := range pieces {
		word := strings.TrimPrefix(p, " ")
		if !found["mid-word"] && len(word) >= 4 && strings.IndexFunc(word, func(r rune) bool { return !unicode.IsLetter(r) || r > unicode.MaxASCII }) < 0 {
			cuts = append(cuts, cutPoint{"mid-word", off + len(p) - len(word) + 2})
			found["mid-word"] = true
		}
		if !found["after a space"] && i > 3 && strings.HasPrefix(p, " ") && len(p) > 1 {
			cuts = append(cuts, cutPoint{"after a space", off + 1})
			found["after a space"] = true
		}
		if !found["piece boundary"] && i == len(pieces)/2 {
			cuts = append(cuts, cutPoint{"piece boundary", off})
			found["piece boundary"] = true
		}
		if j := strings.Index(p, "\u200d"); !found["inside a ZWJ sequence"] && j > 0 {
			cuts = append(cuts, cutPoint{"inside a ZWJ sequence", off + j + len("\u200d")})
			found["inside a ZWJ sequence"] = true
		}
		off += len(p)
	}
	if len(found) != 4 {
		t.Fatalf("the seed's answer lacks some cut points (found %v): %q", found, full)
	}
	return cuts
}

// TestContinuation: for each dialect, streamed and not, a second
// simulator with the same seed, asked to continue the first one's
// answer cut anywhere (as a prefill, with the continue instruction,
// with DeepSeek's prefix flag or vLLM's continue_final_message), sends
// exactly the rest: the first answer's text == P + the continuation,
// with no reasoning in the continuation.
func TestContinuation(t *testing.T) {
	_, first := startServer(t, contCfg)
	_, next := startServer(t, contCfg)
	_, content := Texts(contCfg)
	cuts := cutPoints(t, content)
	for _, d := range dialects {
		for _, stream := range []bool{true, false} {
			name := fmt.Sprintf("%s stream=%v", dialectNames[d], stream)
			whole := readGot(t, d, stream, postDialect(t, first.URL, first.Client(), d, convo{stream: stream}.body(d)))
			if whole.reasoning == "" || whole.text != strings.Join(content, "") {
				t.Fatalf("%s: the first answer: reasoning %q, text %q", name, whole.reasoning, whole.text)
			}
			type variant struct {
				name string
				c    convo
			}
			variants := []variant{{"prefill", convo{stream: stream}}, {"instruction", convo{stream: stream, instruct: true}}}
			if d == handoff.Chat {
				variants = append(variants,
					variant{"prefix", convo{stream: stream, onPrefix: `,"prefix":true`}},
					variant{"continue_final_message", convo{stream: stream, top: `,"continue_final_message":true,"add_generation_prompt":false`}})
			}
			for _, cut := range cuts {
				p := whole.text[:cut.at]
				for _, v := range variants {
					c := v.c
					c.prefix = &p
					g := readGot(t, d, stream, postDialect(t, next.URL, next.Client(), d, c.body(d)))
					label := fmt.Sprintf("%s, %s, cut %s (%d)", name, v.name, cut.name, cut.at)
					if g.reasoning != "" {
						t.Errorf("%s: the continuation reasons again: %q", label, g.reasoning)
					}
					if p+g.text != whole.text {
						t.Errorf("%s: P + continuation != the answer:\nP    %q\ncont %q\nwant %q", label, p, g.text, whole.text)
					}
					if stream && (g.err != nil || (g.last() != "[DONE]" && g.last() != "message_stop" && g.last() != "response.completed")) {
						t.Errorf("%s: the stream ended with %q, %v", label, g.last(), g.err)
					}
					if stream && g.tokens != g.textDeltas {
						t.Errorf("%s: usage counts %d output tokens for %d deltas", label, g.tokens, g.textDeltas)
					}
				}
			}
		}
	}
}

// TestContinuationTrimmedPrefill: a relay trims the white space that
// ends a prefill (Anthropic refuses it); the continuation then starts
// with that white space, so the first answer == the trimmed P + the
// continuation.
func TestContinuationTrimmedPrefill(t *testing.T) {
	_, ts := startServer(t, contCfg)
	_, content := Texts(contCfg)
	full := strings.Join(content, "")
	var cut int
	for _, c := range cutPoints(t, content) {
		if c.name == "after a space" {
			cut = c.at
		}
	}
	p := strings.TrimRightFunc(full[:cut], unicode.IsSpace)
	if p == full[:cut] {
		t.Fatalf("cut %d is not after white space: %q", cut, full[:cut])
	}
	for _, d := range dialects {
		for _, stream := range []bool{true, false} {
			g := readGot(t, d, stream, postDialect(t, ts.URL, ts.Client(), d, convo{stream: stream, prefix: &p}.body(d)))
			if g.reasoning != "" || p+g.text != full || !strings.HasPrefix(g.text, " ") {
				t.Errorf("%s stream=%v: reasoning %q, P %q + %q != %q", dialectNames[d], stream, g.reasoning, p, g.text, full)
			}
		}
	}
}

// TestContinuationOverlap: with ContinueOverlap N the continuation
// first repeats the last N runes of P (all of P when it is shorter).
func TestContinuationOverlap(t *testing.T) {
	cfg := contCfg
	cfg.ContinueOverlap = 5
	_, ts := startServer(t, cfg)
	_, content := Texts(cfg)
	full := strings.Join(content, "")
	for _, cut := range cutPoints(t, content) {
		p := full[:cut.at]
		ov := p
		if r := []rune(p); len(r) > cfg.ContinueOverlap {
			ov = string(r[len(r)-cfg.ContinueOverlap:])
		}
		for _, d := range dialects {
			for _, stream := range []bool{true, false} {
				g := readGot(t, d, stream, postDialect(t, ts.URL, ts.Client(), d, convo{stream: stream, prefix: &p, instruct: true}.body(d)))
				rest, ok := strings.CutPrefix(g.text, ov)
				if !ok || p+rest != full || g.reasoning != "" {
					t.Errorf("%s stream=%v cut %s: continuation %q, want %q then the rest after %q", dialectNames[d], stream, cut.name, g.text, ov, p)
				}
			}
		}
	}
}

// TestContinuationOtherwiseAnswersAsUsual: an assistant turn that is
// not the start of the simulator's answer (or a conversation that only
// ends with the instruction) gets the usual whole answer, reasoning
// first; so does an empty or white-space prefill.
func TestContinuationOtherwiseAnswersAsUsual(t *testing.T) {
	_, ts := startServer(t, contCfg)
	_, content := Texts(contCfg)
	full := strings.Join(content, "")
	for _, p := range []string{"Something else entirely", full[:len(full)-1] + "X", " \n", ""} {
		for _, d := range dialects {
			for _, stream := range []bool{true, false} {
				g := readGot(t, d, stream, postDialect(t, ts.URL, ts.Client(), d, convo{stream: stream, prefix: &p, instruct: true}.body(d)))
				if g.reasoning == "" || g.text != full {
					t.Errorf("%s stream=%v P %q: reasoning %q, text %q", dialectNames[d], stream, p, g.reasoning, g.text)
				}
			}
		}
	}
}

// TestContinuationEcho: in the handoff echo mode the answer is the echo
// of the conversation without the tail, which a continuation continues.
func TestContinuationEcho(t *testing.T) {
	cfg := contCfg
	cfg.Echo = EchoHandoff
	_, ts := startServer(t, cfg)
	want := EchoText("none", "")
	p := want[:len(want)/2]
	for _, d := range dialects {
		g := readGot(t, d, true, postDialect(t, ts.URL, ts.Client(), d, convo{stream: true, prefix: &p}.body(d)))
		if p+g.text != want {
			t.Errorf("%s: %q + %q, want %q", dialectNames[d], p, g.text, want)
		}
	}
}

// TestContinuationTagsForm: in Chat's tags forms a continuation is the
// rest of the answer alone, without a think block.
func TestContinuationTagsForm(t *testing.T) {
	for _, form := range []string{ReasoningTags, ReasoningTagsUnopened} {
		cfg := contCfg
		cfg.ReasoningForm = form
		_, ts := startServer(t, cfg)
		_, content := Texts(cfg)
		full := strings.Join(content, "")
		p := full[:len(full)/3]
		for p != "" && !utf8.ValidString(p) {
			p = p[:len(p)-1]
		}
		for _, stream := range []bool{true, false} {
			g := readGot(t, handoff.Chat, stream, postDialect(t, ts.URL, ts.Client(), handoff.Chat, convo{stream: stream, prefix: &p}.body(handoff.Chat)))
			if p+g.text != full {
				t.Errorf("%s stream=%v: %q + %q, want %q", form, stream, p, g.text, full)
			}
		}
	}
}

// TestContinuationToolCall: a request whose answer is a tool call gets
// the same call (name and arguments) when it comes back as a
// continuation, on another simulator with the same seed; a continuation
// after a tool result continues the text instead of calling again.
func TestContinuationToolCall(t *testing.T) {
	_, first := startServer(t, contCfg)
	_, next := startServer(t, contCfg)
	p := "Let me look"
	for _, d := range dialects {
		for _, stream := range []bool{true, false} {
			name := fmt.Sprintf("%s stream=%v", dialectNames[d], stream)
			call := readGot(t, d, stream, postDialect(t, first.URL, first.Client(), d, convo{stream: stream, tools: true}.body(d)))
			if call.name != "lookup" || !jsonEqual([]byte(call.args), []byte(ToolInput)) || call.text != "" {
				t.Fatalf("%s: the first answer: %+v", name, call)
			}
			for _, c := range []convo{{stream: stream, tools: true, prefix: &p}, {stream: stream, tools: true, prefix: &p, instruct: true}, {stream: stream, tools: true}} {
				again := readGot(t, d, stream, postDialect(t, next.URL, next.Client(), d, c.body(d)))
				if again.name != call.name || again.args != call.args || again.text != "" {
					t.Errorf("%s: the restarted call is %q %q (text %q), want %q %q", name, again.name, again.args, again.text, call.name, call.args)
				}
			}
		}
	}

	// After a tool result, the answer is text, and its continuation too.
	_, content := Texts(contCfg)
	full := strings.Join(content, "")
	cut := full[:len(full)/2]
	for cut != "" && !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	bodies := map[handoff.Dialect]string{
		handoff.Chat: `{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"lookup"}}],"tool_choice":"required","messages":[` +
			`{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"42"},{"role":"assistant","content":` + q(cut) + `}]}`,
		handoff.Messages: `{"model":"m","stream":true,"max_tokens":99,"tools":[{"name":"lookup","input_schema":{}}],"tool_choice":{"type":"any"},"messages":[` +
			`{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"lookup","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"42"}]},{"role":"assistant","content":` + q(cut) + `}]}`,
		handoff.Responses: `{"model":"m","stream":true,"tools":[{"type":"function","name":"lookup"}],"tool_choice":"required","input":[` +
			`{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"lookup","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"c1","output":"42"},{"role":"assistant","content":` + q(cut) + `}]}`,
	}
	for _, d := range dialects {
		g := readGot(t, d, true, postDialect(t, next.URL, next.Client(), d, bodies[d]))
		if g.name != "" || cut+g.text != full {
			t.Errorf("%s after a tool result: call %q, text %q + %q, want %q", dialectNames[d], g.name, cut, g.text, full)
		}
	}
}

func TestContinuePieces(t *testing.T) {
	pieces := []string{"Let", " us", " think", " 👨‍👩‍👧", "."}
	for _, tc := range []struct {
		p       string
		overlap int
		want    []string
		ok      bool
	}{
		{"L", 0, []string{"et", " us", " think", " 👨‍👩‍👧", "."}, true},
		{"Let", 0, []string{" us", " think", " 👨‍👩‍👧", "."}, true},
		{"Let us ", 0, []string{"think", " 👨‍👩‍👧", "."}, true},
		{"Let us \n", 0, []string{" think", " 👨‍👩‍👧", "."}, true}, // trimmed: "Let us"
		{"Let us think 👨", 0, []string{"\u200d👩\u200d👧", "."}, true},
		{"Let us think 👨‍👩‍👧.", 0, nil, true},
		{"Let us think 👨‍👩‍👧.", 2, []string{"👧."}, true},
		{"Let u", 3, []string{"t us", " think", " 👨‍👩‍👧", "."}, true},
		{"Le", 9, []string{"Let", " us", " think", " 👨‍👩‍👧", "."}, true},
		{"Let them", 0, nil, false},
		{" ", 0, nil, false},
		{"", 0, nil, false},
	} {
		got, ok := continuePieces(pieces, tc.p, tc.overlap)
		if ok != tc.ok || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("continuePieces(%q, %d) = %q, %v; want %q, %v", tc.p, tc.overlap, got, ok, tc.want, tc.ok)
		}
	}
}

// TestContinuationAnyRequestNumber: the text does not depend on the
// request's number (nor on the simulator that answers): a continuation
// sent to a simulator that has served other requests gets the same rest.
func TestContinuationAnyRequestNumber(t *testing.T) {
	s, ts := startServer(t, contCfg)
	_, content := Texts(contCfg)
	full := strings.Join(content, "")
	p := full[:len(full)/4]
	for p != "" && !utf8.ValidString(p) {
		p = p[:len(p)-1]
	}
	var rests []string
	for range 3 {
		for _, d := range dialects {
			g := readGot(t, d, true, postDialect(t, ts.URL, ts.Client(), d, convo{stream: true, prefix: &p}.body(d)))
			rests = append(rests, g.text)
		}
	}
	for i, r := range rests {
		if p+r != full {
			t.Errorf("request %d: %q", i+1, r)
		}
	}
	if s.Requests() != int64(len(rests)) {
		t.Errorf("%d requests", s.Requests())
	}
}

// FuzzContinuePieces: for any answer so far p, continuePieces accepts p
// exactly when the answer starts with it (or with it right-trimmed), and
// then the matched p, the rest after the overlap, and the overlap (the
// last runes of p) make the answer.
func FuzzContinuePieces(f *testing.F) {
	f.Add(int64(1), 10, 0, "")
	f.Add(int64(7), 0, 3, "")
	f.Add(int64(11), 33, 5, " \n")
	f.Add(int64(2), 5, 1, "x")
	f.Fuzz(func(t *testing.T, seed int64, cut, overlap int, junk string) {
		if overlap < 0 || overlap > 64 {
			return
		}
		pieces := pieces(seed, 2, 12)
		full := strings.Join(pieces, "")
		if cut < 0 || cut > len(full) {
			return
		}
		p := full[:cut] + junk
		out, ok := continuePieces(pieces, p, overlap)
		matched := p
		if !strings.HasPrefix(full, p) {
			matched = strings.TrimRightFunc(p, unicode.IsSpace)
		}
		want := matched != "" && strings.HasPrefix(full, matched) && utf8.ValidString(matched)
		if !utf8.ValidString(p) {
			return // a client's JSON never carries it
		}
		if ok != want {
			t.Fatalf("p %q: ok %v, want %v", p, ok, want)
		}
		if !ok {
			return
		}
		ov := lastRunes(matched, overlap)
		rest, cutOK := strings.CutPrefix(strings.Join(out, ""), ov)
		if !cutOK || matched+rest != full || utf8.RuneCountInString(ov) != min(overlap, utf8.RuneCountInString(matched)) {
			t.Fatalf("p %q overlap %d: %q", p, overlap, out)
		}
		for _, d := range out {
			if d == "" || !utf8.ValidString(d) {
				t.Fatalf("p %q: delta %q", p, d)
			}
		}
	})
}
