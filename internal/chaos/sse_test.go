package chaos

import (
	"bytes"
	"testing"
)

func feedAll(b []byte) ([]Event, *LFParser) {
	var ps LFParser
	return ps.Feed(b), &ps
}

func TestLFParser(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		data     []string
		comments int
		pending  bool
	}{
		{"LF blocks", "data: a\n\ndata: b\n\n", []string{"a", "b"}, 0, false},
		{"CRLF blocks", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}, 0, false},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"a\nb"}, 0, false},
		{"no space after colon", "data:x\n\n", []string{"x"}, 0, false},
		{"comments are heartbeats", ": keep-alive\n\ndata: a\n\n: keep-alive\n\n", []string{"a"}, 2, false},
		{"bare CR is not a line end", "data: a\r\rdata: b\r\r", nil, 0, true},
		{"glued after LF CR", "data: a\n\rdata: {\"error\":1}\n\n", []string{"a"}, 0, false},
		{"unterminated event", "data: a\n", nil, 0, true},
		{"unterminated line", "data: a", nil, 0, true},
		{"event type only", "event: ping\n\n", []string{""}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, ps := feedAll([]byte(tt.in))
			var got []string
			for _, ev := range evs {
				got = append(got, string(ev.Data))
			}
			if len(got) != len(tt.data) {
				t.Fatalf("events %q, want %q", got, tt.data)
			}
			for i := range got {
				if got[i] != tt.data[i] {
					t.Fatalf("events %q, want %q", got, tt.data)
				}
			}
			if ps.Comments != tt.comments {
				t.Errorf("comments %d, want %d", ps.Comments, tt.comments)
			}
			if ps.Pending() != tt.pending {
				t.Errorf("pending %v, want %v", ps.Pending(), tt.pending)
			}
		})
	}
}

func TestLFParserKeepsEventType(t *testing.T) {
	evs, _ := feedAll([]byte("event: error\ndata: {}\n\n"))
	if len(evs) != 1 || evs[0].Type != "error" || !evs[0].HasData {
		t.Fatalf("got %+v", evs)
	}
}

func TestLFParserBoundsALongLine(t *testing.T) {
	var ps LFParser
	chunk := bytes.Repeat([]byte("data: x\r"), 4096)
	for range 64 { // 2 MiB of one CR-only "line"
		ps.Feed(chunk)
	}
	if len(ps.line) > maxLine {
		t.Fatalf("kept %d bytes of one line, bound %d", len(ps.line), maxLine)
	}
}

// FuzzLFParser: no panic, and feeding in two pieces at any split gives
// the same events and counts as feeding at once; classifying any stream
// body never panics and is deterministic.
func FuzzLFParser(f *testing.F) {
	for _, s := range []string{
		"data: {\"choices\":[]}\n\ndata: [DONE]\n\n",
		"data: a\r\rdata: [DONE]\r\r",
		"data: a\n\rdata: {\"error\":{\"message\":\"x\"}}\n\n",
		": keep-alive\n\nevent: error\ndata: {}\n\n",
		"event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n",
		"data: not json\n\n",
	} {
		f.Add([]byte(s), uint16(3), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, split uint16, responses bool) {
		whole, ps1 := feedAll(b)
		var ps2 LFParser
		k := int(split) % (len(b) + 1)
		parts := append(ps2.Feed(b[:k]), ps2.Feed(b[k:])...)
		if len(whole) != len(parts) || ps1.Comments != ps2.Comments || ps1.Lines != ps2.Lines || ps1.Pending() != ps2.Pending() {
			t.Fatalf("split at %d: %d events / %d comments vs %d / %d", k, len(parts), ps2.Comments, len(whole), ps1.Comments)
		}
		for i := range whole {
			if whole[i].Type != parts[i].Type || !bytes.Equal(whole[i].Data, parts[i].Data) || whole[i].HasData != parts[i].HasData {
				t.Fatalf("event %d differs: %+v vs %+v", i, whole[i], parts[i])
			}
		}
		o := &Observation{Stream: true, Responses: responses, Status: 200, ContentType: "text/event-stream", Events: whole}
		r1, r2 := Classify(o), Classify(o)
		if r1 != r2 {
			t.Fatalf("not deterministic: %v vs %v", r1, r2)
		}
		// A stream that an SDK reads to [DONE] without error is complete
		// only if it really contains a [DONE] data event.
		if r1.Class == Complete && !responses && !bytes.Contains(b, []byte("[DONE]")) {
			t.Fatalf("complete without [DONE]: %q", b)
		}
		// An LF-terminated error event appended to a stream that has not
		// ended must be seen, whatever came before, once the stream's
		// partial line and event are closed by a fresh line.
		if !bytes.Contains(b, []byte("[DONE]")) && !bytes.Contains(b, []byte("completed")) {
			var ps LFParser
			evs := ps.Feed(b)
			evs = append(evs, ps.Feed([]byte("\n\n"+`data: {"error":{"message":"x"}}`+"\n\n"))...)
			r := Classify(&Observation{Stream: true, Responses: responses, Status: 200, ContentType: "text/event-stream", Events: evs})
			if r.Class != ExplicitError && r.Class != Malformed {
				t.Fatalf("error event after %q classified %v (%s)", b, r.Class, r.Detail)
			}
		}
	})
}
