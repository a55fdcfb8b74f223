package main

import (
	"io"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/tagged"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

// tagSyntax is what an upstream with `reasoning_format tags` and nothing
// else (no reasoning_tags, no starts_in_reasoning) parses its content
// with: <think> and <thinking> blocks anywhere.
var tagSyntax = thinktag.MustNew(thinktag.Config{})

// relayEvent is one event of a trace as the relay's pacer reads it, with
// the time and step of the upstream event whose arrival delivered it.
type relayEvent struct {
	at   time.Duration
	step int
	ev   sse.Event
}

// relayEvents returns a trace's data events as the relay reads them. A
// tagged trace's go through tagged.NewSource first, as the relay's do
// for an upstream with `reasoning_format tags`: the reasoning moves from
// content into reasoning_content, and the text the parser holds back (a
// piece that may begin a tag) goes out with the next upstream event,
// stamped with that event's arrival. Other traces' events are their
// own.
func relayEvents(t traces.Trace) ([]relayEvent, error) {
	evs, err := t.Events()
	if err != nil {
		return nil, err
	}
	out := make([]relayEvent, 0, len(evs))
	if !t.Tagged {
		for _, e := range evs {
			out = append(out, relayEvent{e.At, e.Step, sse.DataEvent(sse.AppendData(nil, e.Data))})
		}
		return out, nil
	}
	src := &eventSource{evs: evs}
	ts := tagged.NewSource(src, tagSyntax, chat.FieldReasoningContent)
	for {
		ev, err := ts.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		cur := evs[max(src.next-1, 0)] // the upstream event last read
		out = append(out, relayEvent{cur.At, cur.Step, ev.Clone()})
	}
}

// eventSource is a trace's data events as an sse.Source.
type eventSource struct {
	evs  []traces.Event
	next int
}

func (s *eventSource) Next() (sse.Event, error) {
	if s.next == len(s.evs) {
		return sse.Event{}, io.EOF
	}
	e := s.evs[s.next]
	s.next++
	return sse.DataEvent(sse.AppendData(nil, e.Data)), nil
}
