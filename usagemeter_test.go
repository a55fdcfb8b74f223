package llmrelay

import (
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// eventList is a pace.Source over fixed events.
type eventList struct {
	evs []sse.Event
	i   int
}

func (l *eventList) Next() (sse.Event, error) {
	if l.i == len(l.evs) {
		return sse.Event{}, errEventsOver
	}
	l.i++
	return l.evs[l.i-1], nil
}

var errEventsOver = io.EOF

// TestUsageMeterCounts: the meter's estimate of a stream with no usage
// counts answer, reasoning and tool call arguments, and its prompt is
// estimated only then; a stream with a usage object, or a provider's own,
// is not estimated, and "usage":null on every chunk is no usage.
func TestUsageMeterCounts(t *testing.T) {
	chunk := func(delta string) sse.Event {
		return sse.NewEvent("", []byte(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":`+delta+`,"finish_reason":null}],"usage":null}`))
	}
	var evs []sse.Event
	evs = append(evs, chunk(`{"role":"assistant","content":""}`))
	for range 3000 { // well past maxPending
		evs = append(evs, chunk(`{"reasoning_content":"think é "}`), chunk(`{"content":"word "}`))
	}
	evs = append(evs, chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"city\":\"Paris\"}"}}]}`))
	evs = append(evs, sse.NewEvent("", []byte(`[DONE]`)))

	// Counted by hand, not by the classifier the meter calls: "think é "
	// is 8 runes, "word " 5, the arguments {"city":"Paris"} 16.
	const want = 3000*(8+5) + 16
	m := newUsageMeter(&eventList{evs: evs}, func() int { return 7 })
	var last sse.Event
	estimates := 0
	for {
		ev, err := m.Next()
		if err != nil {
			break
		}
		last = ev
		if ev.IsDone() {
			break
		}
		if strings.Contains(string(ev.Data), `"usage":{`) {
			estimates++
			if !strings.Contains(string(ev.Data), `"completion_tokens":`+strconv.Itoa((want+3)/4)) || !strings.Contains(string(ev.Data), `"prompt_tokens":7`) {
				t.Fatalf("the estimate: %s, want %d completion tokens", ev.Data, (want+3)/4)
			}
		}
	}
	if estimates != 1 || !last.IsDone() || m.upstreamUsage() || m.completion() != (want+3)/4 {
		t.Fatalf("%d usage chunks, want the one estimate before [DONE]; completion %d, want %d (%d runes); upstream usage %v",
			estimates, m.completion(), (want+3)/4, want, m.upstreamUsage())
	}

	for name, u := range map[string]string{
		"standard": `{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`,
		"groq":     `{"id":"c","object":"chat.completion.chunk","choices":[],"x_groq":{"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}}`,
	} {
		withUsage := append(append([]sse.Event{}, evs[:5]...), sse.NewEvent("", []byte(u)), sse.NewEvent("", []byte(`[DONE]`)))
		m := newUsageMeter(&eventList{evs: withUsage}, func() int { t.Fatal("the prompt was estimated"); return 0 })
		for {
			if _, err := m.Next(); err != nil {
				break
			}
		}
		if !m.upstreamUsage() {
			t.Errorf("%s: the usage was not seen", name)
		}
	}
}

// TestUsageMeterCountedByPacer: under a pacer that counts (a Gemini
// client's answer, pace.RuneCounted), the meter's estimate is the
// pacer's count, and it still notes a usage that comes.
func TestUsageMeterCountedByPacer(t *testing.T) {
	evs := []sse.Event{
		sse.NewEvent("", []byte(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"word "},"finish_reason":null}],"usage":null}`)),
		sse.NewEvent("", []byte(`[DONE]`)),
	}
	m := newUsageMeter(&eventList{evs: evs}, func() int { return 2 })
	m.CountedBy(func() int { return 41 })
	ev, _ := m.Next()
	if ev.IsDone() || m.runes != 0 {
		t.Fatalf("the meter counted itself: %d runes", m.runes)
	}
	if ev, _ = m.Next(); !strings.Contains(string(ev.Data), `"completion_tokens":11`) || !strings.Contains(string(ev.Data), `"prompt_tokens":2`) {
		t.Fatalf("the estimate is not the pacer's count: %s", ev.Data)
	}
	withUsage := []sse.Event{sse.NewEvent("", []byte(`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`)), evs[1]}
	m = newUsageMeter(&eventList{evs: withUsage}, func() int { return 2 })
	m.CountedBy(func() int { return 41 })
	for {
		if _, err := m.Next(); err != nil {
			break
		}
	}
	if !m.upstreamUsage() {
		t.Error("the usage was not noted")
	}
}
