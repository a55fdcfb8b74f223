package anthropic

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// msgEv is one Messages event on the wire.
func msgEv(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

// chatEv is one Chat chunk on the wire.
func chatEv(data string) string { return "data: " + data + "\n\n" }

// reusingSource yields the blocks of an SSE text like an sse.Reader, but
// every event's Raw and Data share one buffer that is scribbled over at
// the next call: a translator that keeps src's slices is caught.
type reusingSource struct {
	rd  *sse.Reader
	buf []byte
	err error // returned instead of io.EOF when set
	br  func()
}

func newReusingSource(text string) *reusingSource {
	return &reusingSource{rd: sse.NewReader(strings.NewReader(text), 0)}
}

func (r *reusingSource) BeforeRead(f func()) { r.br = f }

func (r *reusingSource) Next() (sse.Event, error) {
	for i := range r.buf {
		r.buf[i] = 'X'
	}
	ev, err := r.rd.Next()
	if err == io.EOF && r.err != nil {
		err = r.err
	}
	if err != nil {
		return ev, err
	}
	r.buf = append(r.buf[:0], ev.Raw...)
	r.buf = append(r.buf, ev.Data...)
	n := len(ev.Raw)
	ev.Raw = r.buf[:n:n]
	if ev.Data != nil {
		ev.Data = r.buf[n:len(r.buf):len(r.buf)]
	}
	return ev, nil
}

// streamOut is one output event: its SSE type and data.
type streamOut struct{ typ, data string }

// drain reads src to its end; the error it ended with is returned, and
// must repeat on the next call.
func drainStream(t *testing.T, src sse.Source) ([]streamOut, error) {
	t.Helper()
	var evs []sse.Event
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("stream does not end")
		}
		ev, err := src.Next()
		if err != nil {
			if _, err2 := src.Next(); err2 != err {
				t.Fatalf("error not sticky: %v then %v", err, err2)
			}
			// Compare only after the whole stream: an event aliasing
			// src's buffer would have been scribbled over by now.
			outs := make([]streamOut, len(evs))
			for j, e := range evs {
				outs[j] = streamOut{e.Type, string(e.Data)}
				if !reflect.DeepEqual(e, sse.NewEvent(e.Type, e.Data)) {
					t.Errorf("event %d is not as sse.NewEvent makes it: %+v", j, e)
				}
			}
			return outs, err
		}
		evs = append(evs, ev)
	}
}

// sameOuts compares output event lists, naming the first difference.
func sameOuts(t *testing.T, got, want []streamOut) {
	t.Helper()
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w streamOut
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Fatalf("event %d:\n got  %q %s\n want %q %s\n(%d events, want %d)", i, g.typ, g.data, w.typ, w.data, len(got), len(want))
		}
	}
}

// TestBeforeReadForwarded: both translators hand the relay's hook to src,
// and an sse.Reader under them calls it.
func TestBeforeReadForwarded(t *testing.T) {
	for name, wrap := range map[string]func(sse.Source) sse.Source{
		"ToChatStream":   func(s sse.Source) sse.Source { return ToChatStream(s, chat.Options{}) },
		"FromChatStream": func(s sse.Source) sse.Source { return FromChatStream(s, chat.Options{}) },
	} {
		src := newReusingSource("")
		br, ok := wrap(src).(interface{ BeforeRead(func()) })
		if !ok {
			t.Fatalf("%s: no BeforeRead", name)
		}
		called := 0
		br.BeforeRead(func() { called++ })
		if src.br == nil {
			t.Fatalf("%s: BeforeRead not forwarded", name)
		}
		src.br()
		if called != 1 {
			t.Fatalf("%s: forwarded hook not the caller's", name)
		}

		rd := sse.NewReader(strings.NewReader(chatEv(`{}`)), 0)
		called = 0
		tr := wrap(rd)
		tr.(interface{ BeforeRead(func()) }).BeforeRead(func() { called++ })
		for range 3 {
			tr.Next()
		}
		if called == 0 {
			t.Fatalf("%s: sse.Reader's hook never called", name)
		}
		// No BeforeRead on src: nothing to forward, no panic.
		wrap(struct{ sse.Source }{src}).(interface{ BeforeRead(func()) }).BeforeRead(func() {})
	}
}

// TestSourceErrorPassesThrough: a read error other than EOF reaches the
// caller unchanged, after the events made before it.
func TestSourceErrorPassesThrough(t *testing.T) {
	boom := errors.New("boom")
	src := newReusingSource(msgEv("message_start", `{"type":"message_start","message":{"id":"m","model":"x"}}`) +
		msgBlockStart("0", `{"type":"text","text":""}`) +
		msgEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`))
	src.err = boom
	got, err := drainStream(t, ToChatStream(src, chat.Options{}))
	if err != boom || len(got) != 2 {
		t.Fatalf("ToChatStream: %d events, err %v; want 2 then boom", len(got), err)
	}
	csrc := newReusingSource(chatEv(`{"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}]}`))
	csrc.err = boom
	got, err = drainStream(t, FromChatStream(csrc, chat.Options{}))
	if err != boom || len(got) == 0 {
		t.Fatalf("FromChatStream: %d events, err %v; want some then boom", len(got), err)
	}
}
