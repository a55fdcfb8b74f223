package splice

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// contStream is a synthetic continuation in Chat form, as another
// provider would send it (id, model, created of its own): a role chunk,
// reasoning in the "reasoning" member when given, a keep-alive, text in
// pieces of 1 to 6 runes, the refusal and tool calls of want (held by the
// recorder, so never handed before a break: the continuation makes them
// anew), want's finish, a usage chunk, [DONE].
func contStream(t testing.TB, id, reasoning, text string, want *client, seed int) []sse.Event {
	head := `{"id":"` + id + `","object":"chat.completion.chunk","created":200,"model":"m-` + id + `","choices":[`
	ev := func(delta, finish string) sse.Event {
		return block(t, "data: "+head+`{"index":0,"delta":`+delta+`,"logprobs":null,"finish_reason":`+finish+"}]}\n\n")
	}
	evs := []sse.Event{ev(`{"role":"assistant","content":""}`, "null")}
	for i, p := range pieces(reasoning, 3+seed%3) {
		evs = append(evs, ev(`{"reasoning":`+chatQuote(p)+`}`, "null"))
		if i == 0 {
			evs = append(evs, block(t, ": keep-alive\n\n"))
		}
	}
	for _, p := range pieces(text, 2+seed%5) {
		evs = append(evs, ev(`{"content":`+chatQuote(p)+`}`, "null"))
	}
	if r := want.refusal.String(); r != "" {
		evs = append(evs, ev(`{"refusal":`+chatQuote(r)+`}`, "null"))
	}
	for _, i := range want.sortedCalls() {
		c := want.calls[i]
		evs = append(evs, ev(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%s,"type":"function","function":{"name":%s,"arguments":""}}]}`, i, chatQuote(c.ID), chatQuote(c.Name)), "null"))
		for _, p := range pieces(c.Args, 1+len(c.Args)/2) {
			evs = append(evs, ev(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, chatQuote(p)), "null"))
		}
	}
	if want.finish != "" {
		evs = append(evs, ev(`{}`, chatQuote(want.finish)))
	}
	evs = append(evs, block(t, "data: "+head+`],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`+"\n\n"), doneEv(t))
	return evs
}

// pieces cuts s into pieces of n runes (the last shorter).
func pieces(s string, n int) []string {
	var ps []string
	for s != "" {
		i, k := 0, 0
		for i < len(s) && k < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			k++
		}
		ps = append(ps, s[:i])
		s = s[i:]
	}
	return ps
}

// lastRunes is the last n runes of s.
func lastRunes(s string, n int) string {
	i := len(s)
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}

// TestChatSpliceRecordings breaks every recorded Chat stream before each
// of its events, continues it with a synthetic stream of the rest of its
// answer, and checks what the client reassembles: the recording's
// content byte for byte, its refusal, tool calls and finish, one role
// chunk, one id, the usage of both attempts. Variants: no overlap
// handling; a continuation that repeats the last 20 runes sent (dropped);
// the reasoning hidden; a continuation that breaks in turn and is
// continued again; a break inside a text chunk (half its text handed).
func TestChatSpliceRecordings(t *testing.T) {
	early := usage.Usage{Prompt: 100, Completion: 50, Reasoning: 5, Cached: 3}
	points := 60 // break points per recording at most, spread over it
	if testing.Short() || chatRace {
		points = 12
	}
	mids := 0 // breaks inside a text chunk
	for _, path := range chatRecordingFiles(t) {
		evs := readRecording(t, path)
		full := newClient()
		full.read(evs...)
		if len(full.errs) > 0 || full.dones != 1 || full.roles != 1 {
			t.Fatalf("%s: the test's client reads it badly: %v, %d [DONE], %d roles", path, full.errs, full.dones, full.roles)
		}
		name := filepath.Base(filepath.Dir(path)) + "/" + filepath.Base(path)
		for k := 0; k < len(evs); k += max(1, len(evs)/points) {
			if _, ok := halfText(t, evs[k]); ok {
				mids++
			}
			for _, variant := range []string{"plain", "overlap", "hide", "twice", "mid"} {
				if msg := spliceRecording(t, evs, full, k, variant, early); msg != "" {
					t.Errorf("%s, break before event %d, %s: %s", name, k, variant, msg)
				}
			}
		}
	}
	if mids < 20 {
		t.Errorf("%d breaks inside a text chunk, want 20 or more", mids)
	}
}

// spliceRecording runs one case of TestChatSpliceRecordings; "" when the
// client got the recording's answer.
func spliceRecording(t *testing.T, evs []sse.Event, full *client, k int, variant string, early usage.Usage) string {
	rec := NewRecorder(Chat, 1<<20)
	cl := newClient()
	cl.read(feed(rec, evs[:k]...)...)
	if variant == "mid" {
		// The break falls inside event k: the client had half its text.
		half, ok := halfText(t, evs[k])
		if !ok {
			return ""
		}
		cl.read(feed(rec, half)...)
	}
	if rec.Overflow() {
		if full.content.String() != "" && strings.Contains(string(evs[0].Data), "ABfw2KKFuVXmEJgVwYfBvejMAdWtq") {
			return "" // chat-three-choices: n > 1 is not continued
		}
		return "Overflow"
	}
	opts := Options{MaxOverlap: -1, Earlier: early, Comment: "continued"}
	switch variant {
	case "overlap":
		opts.MaxOverlap = 0
	case "hide":
		opts.Reasoning = Hide
	}
	splices := 0
	var seam *Seam
	next := func(id string, cut int) string {
		seam = rec.Seam()
		splices++
		switch {
		case seam.Answer != cl.content.String():
			return fmt.Sprintf("seam answer %q, the client has %q", seam.Answer, cl.content.String())
		case seam.Reasoning != cl.reasoning.String():
			return fmt.Sprintf("seam reasoning %q, the client has %q", seam.Reasoning, cl.reasoning.String())
		case !strings.HasPrefix(full.content.String(), seam.Answer):
			return fmt.Sprintf("seam answer %q is not the start of the recording's", seam.Answer)
		case len(cl.calls) > 0 || cl.refusal.Len() > 0 || cl.finish != "":
			return "the client has a tool call, a refusal or a finish before the end"
		}
		rest := full.content.String()[len(seam.Answer):]
		if variant == "overlap" && utf8.RuneCountInString(seam.Answer) >= 20 {
			rest = lastRunes(seam.Answer, 20) + rest
		}
		reasoning := ""
		if full.reasoning.Len() > 0 {
			reasoning = "Thinking it over again, from the top."
		}
		cont := contStream(t, id, reasoning, rest, full, k)
		if cut > 0 {
			cont = cont[:min(cut, len(cont)-1)] // a break: no [DONE]
		}
		cl.read(splice(seam.Splicer(opts), rec, cont...)...)
		return ""
	}
	if variant == "twice" {
		if msg := next("k2", 4+k%5); msg != "" {
			return msg
		}
	}
	handed := cl.reasoning.String()
	if msg := next("k3", 0); msg != "" {
		return msg
	}
	want := handed
	if seam.InReasoning && opts.Reasoning == Mark {
		want += Marker + "Thinking it over again, from the top."
	}
	var u struct{ PromptTokens, CompletionTokens, TotalTokens int }
	b, _ := json.Marshal(cl.usage)
	json.Unmarshal(b, &struct {
		P *int `json:"prompt_tokens"`
		C *int `json:"completion_tokens"`
		T *int `json:"total_tokens"`
	}{&u.PromptTokens, &u.CompletionTokens, &u.TotalTokens})
	switch {
	case len(cl.errs) > 0:
		return fmt.Sprint(cl.errs)
	case cl.content.String() != full.content.String():
		return fmt.Sprintf("content\n%q\nwant\n%q", cl.content.String(), full.content.String())
	case cl.reasoning.String() != want:
		return fmt.Sprintf("reasoning\n%q\nwant\n%q", cl.reasoning.String(), want)
	case cl.refusal.String() != full.refusal.String():
		return fmt.Sprintf("refusal %q, want %q", cl.refusal.String(), full.refusal.String())
	case sameCalls(cl, full) != "":
		return sameCalls(cl, full)
	case cl.finish != full.finish:
		return fmt.Sprintf("finish %q, want %q", cl.finish, full.finish)
	case cl.roles != 1:
		return fmt.Sprintf("%d role chunks", cl.roles)
	case len(cl.ids) != 1 || len(cl.models) != 1:
		return fmt.Sprintf("ids %v, models %v: want one of each", cl.ids, cl.models)
	case cl.dones != 1:
		return fmt.Sprintf("%d [DONE]", cl.dones)
	case cl.comments < splices:
		return fmt.Sprintf("%d comments, want the %d of the splices", cl.comments, splices)
	case u.PromptTokens != 10+early.Prompt || u.CompletionTokens != 20+early.Completion || u.TotalTokens != 30+early.Total():
		return fmt.Sprintf("usage %v", cl.usage)
	}
	return ""
}

// halfText is ev, a chunk of answer text (a string content of 2 runes or
// more, no finish), with the first half of its text; false for another.
func halfText(t *testing.T, ev sse.Event) (sse.Event, bool) {
	d := json.NewDecoder(strings.NewReader(string(ev.Data)))
	d.UseNumber()
	var m map[string]any
	if d.Decode(&m) != nil {
		return ev, false
	}
	choices, _ := m["choices"].([]any)
	if len(choices) != 1 {
		return ev, false
	}
	choice, _ := choices[0].(map[string]any)
	delta, _ := choice["delta"].(map[string]any)
	text, _ := delta["content"].(string)
	if choice["finish_reason"] != nil || utf8.RuneCountInString(text) < 2 {
		return ev, false
	}
	delta["content"] = string([]rune(text)[:utf8.RuneCountInString(text)/2])
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return block(t, "data: "+string(b)+"\n\n"), true
}
