package splice

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// fuzzStream makes Messages streams out of a fuzzer's bytes.
type fuzzStream struct {
	b     []byte
	chaos bool // also junk: unknown types, bad indices, odd data, comments
}

func (g *fuzzStream) next() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

func (g *fuzzStream) str() string {
	n := min(int(g.next()%16), len(g.b))
	s := string(g.b[:n])
	g.b = g.b[n:]
	return s
}

var junkData = []string{`{}`, `[1,2]`, `"x"`, `null`, `{"type":"content_block_delta","index":99,"delta":{"type":"text_delta","text":"j"}}`,
	`{"type":"content_block_delta","index":"0","delta":{"type":"text_delta","text":5}}`, `{"type":"content_block_stop","index":-1}`,
	`{"type":"content_block_start","index":0}`, `{"type":"message_delta","usage":7}`, `{"type":"message_delta","delta":{}}`,
	`{"type":"content_block_start","index":3,"content_block":{"type":"text","text":""}}`}
var junkTypes = []string{"", "ping", "error", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_start", "x"}

// stream returns a well-formed stream (blocks of random types and
// contents), with junk among it when chaos.
func (g *fuzzStream) stream(id string) []sse.Event {
	evs := []sse.Event{mStart(id, int(g.next()))}
	for i := range int(g.next() % 5) {
		typ := []string{"text", "thinking", "tool_use", "server_tool_use", "result", "redacted", "text"}[g.next()%7]
		evs = append(evs, mBlock(i, typ))
		switch typ {
		case "text":
			for range g.next() % 4 {
				evs = append(evs, mText(i, g.str()))
			}
		case "thinking":
			for range g.next() % 4 {
				evs = append(evs, mThink(i, g.str()))
			}
			evs = append(evs, mSig(i, "sig"))
		case "tool_use", "server_tool_use":
			in := `{"k":` + quote(g.str()) + `}`
			for in != "" {
				n := min(1+int(g.next()%8), len(in))
				evs = append(evs, mJSON(i, in[:n]))
				in = in[n:]
			}
		}
		if g.next()%4 == 0 {
			evs = append(evs, mPing())
		}
		evs = append(evs, mStop(i))
	}
	evs = append(evs, mMessageDelta("end_turn", int(g.next())), mMessageStop())
	if g.chaos {
		for range g.next() % 4 {
			at := int(g.next()) % (len(evs) + 1)
			var ev sse.Event
			if g.next()%3 == 0 {
				ev, _ = sse.NewReader(strings.NewReader(": "+strings.NewReplacer("\r", "", "\n", "").Replace(g.str())+"\n\n"), 0).Next()
			} else {
				ev = mev(junkTypes[int(g.next())%len(junkTypes)], junkData[int(g.next())%len(junkData)])
			}
			evs = append(evs[:at], append([]sse.Event{ev.Clone()}, evs[at:]...)...)
		}
	}
	return evs
}

// checkEvents: every event is one valid SSE block, its data JSON.
func checkEvents(t *testing.T, evs []sse.Event) {
	t.Helper()
	for i, ev := range evs {
		rd := sse.NewReader(bytes.NewReader(ev.Raw), 0)
		got, err := rd.Next()
		if err != nil || got.Unterminated || got.Type != ev.Type || !bytes.Equal(got.Data, ev.Data) || got.IsComment() != ev.IsComment() {
			t.Fatalf("event %d: raw %q does not read back (%v)", i, ev.Raw, err)
		}
		if _, err := rd.Next(); err == nil {
			t.Fatalf("event %d: raw %q holds two blocks", i, ev.Raw)
		}
		if !ev.IsComment() && !json.Valid(ev.Data) {
			t.Fatalf("event %d: data %q", i, ev.Data)
		}
	}
}

// FuzzMessagesSplice breaks random streams at random points and splices
// random continuations (once or twice): nothing panics, every event the
// client gets is valid SSE with JSON data and, without junk in the
// input, the client's message is well formed (one start, blocks numbered
// from 0, each stopped once) and its text the handed prefix then the
// continuation's.
func FuzzMessagesSplice(f *testing.F) {
	f.Add([]byte("\x03\x00\x05hello\x02\x04 wor\x03ld!\x01\x07\x02\x02\x01\x09"), byte(0), byte(6))
	f.Add([]byte("\x01\x04\x01\x02\x03abc\x03def\x00\x02\x05\x08q\x01"), byte(1), byte(3))
	f.Add([]byte("\x00\x02\x03\x03\x02ab\x04tool\x05\x00\x06\x03\x09hello the\x03re!"), byte(7), byte(200))
	f.Fuzz(func(t *testing.T, data []byte, flags, at byte) {
		g := &fuzzStream{b: data, chaos: flags&1 != 0}
		first := g.stream("msg_1")
		r := NewRecorder(Messages, 1<<16)
		k := int(at) % len(first) // before the end: a break after message_stop is none
		client := pass(r, first[:k]...)
		s := r.Seam()
		opts := Options{Reasoning: ReasoningRestart(flags >> 1 & 1), MaxOverlap: []int{-1, 0, 9}[int(flags>>2)%3]}
		if flags&32 != 0 {
			opts.Comment = "continued\non b"
		}
		cont := g.stream("msg_2")
		contText := streamText(cont)
		sp := s.Splicer(opts)
		if flags&64 != 0 && len(cont) > 1 {
			j := int(g.next()) % len(cont)
			client = append(client, msgSplice(r, sp, cont[:j]...)...)
			mid, err := reassemble(client, false)
			s2 := r.Seam()
			if err == nil && !g.chaos && !r.Overflow() && s2.Answer != mid.text() {
				t.Fatalf("second seam %q, client has %q", s2.Answer, mid.text())
			}
			cont, sp, s = g.stream("msg_3"), s2.Splicer(opts), s2
			contText = streamText(cont)
		}
		client = append(client, msgSplice(r, sp, cont...)...)
		checkEvents(t, client)
		if g.chaos || r.Overflow() {
			return
		}
		m, err := reassemble(client, true)
		if err != nil {
			t.Fatalf("%v\n%s", err, dump(client))
		}
		if !strings.HasPrefix(m.text(), s.Answer) {
			t.Fatalf("text %q does not start with the seam's %q", m.text(), s.Answer)
		}
		if opts.MaxOverlap < 0 && m.text() != s.Answer+contText {
			t.Fatalf("text %q, want %q + %q", m.text(), s.Answer, contText)
		}
	})
}

func streamText(evs []sse.Event) string {
	m, err := reassemble(evs, false)
	if err != nil {
		return ""
	}
	return m.text()
}

func dump(evs []sse.Event) string {
	var b strings.Builder
	for i, ev := range evs {
		fmt.Fprintf(&b, "%d: %s", i, ev.Raw)
	}
	return b.String()
}
