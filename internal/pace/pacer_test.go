package pace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

// The Pacer on a virtual timeline: every trace of the set is fed at its
// recorded times, Next is called exactly when it asks to be, and what comes
// out is checked for content (byte-exact per channel, nothing reordered)
// and timing (the delay bound, the tail, the first token).

var t0 = time.Unix(1_700_000_000, 0)

// emission is one Next result: what was written, and when.
type emission struct {
	at  time.Duration
	raw []byte
}

// arrival is one upstream block and when it arrived.
type arrival struct {
	at time.Duration
	ev sse.Event
}

// arrivalsOf parses a trace's steps into blocks stamped with their step's
// time.
func arrivalsOf(t *testing.T, tr traces.Trace) []arrival {
	t.Helper()
	var out []arrival
	for _, a := range traceArrivals(tr) {
		out = append(out, arrival{at: a.At, ev: a.Event})
	}
	return out
}

// simulate runs Simulate and fails the test if it does not finish.
func simulate(t *testing.T, cfg Config, arrs []arrival) ([]emission, *Pacer) {
	t.Helper()
	in := make([]Arrival, len(arrs))
	for i, a := range arrs {
		in[i] = Arrival{At: a.at, Event: a.ev}
	}
	out, p, err := Simulate(cfg, in)
	if err != nil {
		t.Fatal(err)
	}
	ems := make([]emission, len(out))
	for i, e := range out {
		ems[i] = emission{at: e.At, raw: e.Raw}
	}
	return ems, p
}

// transcriptOf reassembles the client's view of emitted bytes.
func transcriptOf(t *testing.T, ems []emission) *traces.Transcript {
	t.Helper()
	var all []byte
	for _, e := range ems {
		all = append(all, e.raw...)
	}
	rd := sse.NewReader(bytes.NewReader(all), 0)
	tr := new(traces.Transcript)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return tr
		}
		if err != nil {
			t.Fatalf("output does not parse as SSE: %v", err)
		}
		if ev.Unterminated {
			t.Fatalf("output ends with a cut-off block %q", ev.Raw)
		}
		if !ev.HasData {
			continue
		}
		if !ev.IsDone() && !json.Valid(ev.Data) {
			t.Fatalf("output event is not JSON: %q", ev.Data)
		}
		if _, err := tr.Add(ev.Data); err != nil {
			t.Fatalf("output event: %v", err)
		}
	}
}

func inputTranscript(t *testing.T, arrs []arrival) *traces.Transcript {
	tr := new(traces.Transcript)
	for _, a := range arrs {
		if a.ev.HasData {
			if _, err := tr.Add(a.ev.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tr
}

// sameContent compares everything a client reassembles except the event
// count.
func sameContent(t *testing.T, name string, got, want *traces.Transcript) {
	t.Helper()
	g, w := *got, *want
	g.Events, w.Events = 0, 0
	if !bytes.Equal(g.Reasoning, w.Reasoning) {
		t.Errorf("%s: reasoning differs:\n got %q\nwant %q", name, clip(g.Reasoning), clip(w.Reasoning))
	}
	if !bytes.Equal(g.Answer, w.Answer) {
		t.Errorf("%s: answer differs:\n got %q\nwant %q", name, clip(g.Answer), clip(w.Answer))
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: transcripts differ (choices, tool calls, logprobs, usage, errors or [DONE])", name)
	}
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:100]) + "…" + string(b[len(b)-100:])
	}
	return string(b)
}

var modes = []Mode{ModeOff, ModePace, ModeSplit}

func TestTracesContentExact(t *testing.T) {
	for _, tr := range traces.All() {
		arrs := arrivalsOf(t, tr)
		want := inputTranscript(t, arrs)
		if r, a := tr.Sent(); string(want.Answer) != a || string(want.Reasoning) != r {
			t.Fatalf("%s: the test's parse of the trace disagrees with the trace", tr.Name)
		}
		for _, m := range modes {
			name := tr.Name + "/" + m.String()
			ems, _ := simulate(t, Config{Mode: m}, arrs)
			sameContent(t, name, transcriptOf(t, ems), want)
		}
	}
}

// runeTimes lists, per channel, the time each rune arrived (or left).
type runeTimes struct{ answer, reasoning []time.Duration }

func timesOf(t *testing.T, at func(i int) time.Duration, datas [][]byte) runeTimes {
	var rt runeTimes
	for i, d := range datas {
		tr := new(traces.Transcript)
		pieces, err := tr.Add(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pieces {
			if p.Choice != 0 {
				continue
			}
			for range p.Runes() {
				if p.Reasoning {
					rt.reasoning = append(rt.reasoning, at(i))
				} else {
					rt.answer = append(rt.answer, at(i))
				}
			}
		}
	}
	return rt
}

func outputTimes(t *testing.T, ems []emission) runeTimes {
	var datas [][]byte
	var ats []time.Duration
	for _, e := range ems {
		rd := sse.NewReader(bytes.NewReader(e.raw), 0)
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			if ev.HasData && !ev.IsDone() {
				datas = append(datas, bytes.Clone(ev.Data))
				ats = append(ats, e.at)
			}
		}
	}
	return timesOf(t, func(i int) time.Duration { return ats[i] }, datas)
}

func inputTimes(t *testing.T, arrs []arrival) runeTimes {
	var datas [][]byte
	var ats []time.Duration
	for _, a := range arrs {
		if a.ev.HasData && !a.ev.IsDone() {
			datas = append(datas, a.ev.Data)
			ats = append(ats, a.at)
		}
	}
	return timesOf(t, func(i int) time.Duration { return ats[i] }, datas)
}

func maxLag(in, out []time.Duration) time.Duration {
	var m time.Duration
	for i := range min(len(in), len(out)) {
		m = max(m, out[i]-in[i])
	}
	return m
}

func TestTracesDelayBound(t *testing.T) {
	for _, tr := range traces.All() {
		arrs := arrivalsOf(t, tr)
		in := inputTimes(t, arrs)
		for _, m := range []Mode{ModePace, ModeSplit} {
			cfg := Config{Mode: m}.withDefaults()
			ems, _ := simulate(t, cfg, arrs)
			out := outputTimes(t, ems)
			if len(out.answer) != len(in.answer) || len(out.reasoning) != len(in.reasoning) {
				t.Fatalf("%s/%s: rune counts differ", tr.Name, m)
			}
			reasoningBound := cfg.MaxDelay
			if m == ModeSplit {
				reasoningBound = cfg.ReasoningMaxDelay
			}
			if l := maxLag(in.answer, out.answer); l > cfg.MaxDelay {
				t.Errorf("%s/%s: answer text held %v > max_delay %v", tr.Name, m, l, cfg.MaxDelay)
			}
			if l := maxLag(in.reasoning, out.reasoning); l > reasoningBound {
				t.Errorf("%s/%s: reasoning text held %v > bound %v", tr.Name, m, l, reasoningBound)
			}
			for i := range min(len(in.answer), len(out.answer)) {
				if out.answer[i] < in.answer[i] {
					t.Fatalf("%s/%s: answer rune %d left before it arrived", tr.Name, m, i)
				}
			}
			// The first text leaves the moment it arrives.
			if len(in.reasoning)+len(in.answer) > 0 {
				firstIn, firstOut := firstOf(in), firstOf(out)
				if firstOut != firstIn {
					t.Errorf("%s/%s: first text arrived at %v, left at %v", tr.Name, m, firstIn, firstOut)
				}
			}
			// The tail drains within Flush of the last upstream event.
			last := arrs[len(arrs)-1].at
			if end := ems[len(ems)-1].at; end-last > cfg.Flush {
				t.Errorf("%s/%s: tail flush %v > %v", tr.Name, m, end-last, cfg.Flush)
			}
		}
	}
}

func firstOf(rt runeTimes) time.Duration {
	switch {
	case len(rt.reasoning) == 0:
		return rt.answer[0]
	case len(rt.answer) == 0:
		return rt.reasoning[0]
	}
	return min(rt.answer[0], rt.reasoning[0])
}

// On the clustered traces the pacer must actually smooth: the windowed
// delivery-rate CV drops by at least 70 %, and the events are re-chunked.
func TestClusteredTracesGetSmoother(t *testing.T) {
	for _, tr := range traces.All() {
		if !tr.Clustered {
			continue
		}
		arrs := arrivalsOf(t, tr)
		ms := []Mode{ModePace, ModeSplit}
		if tr.Reasoning != "" {
			// Reasoning clusters 600 ms apart can only be bridged by the
			// reasoning lane's longer bound.
			ms = []Mode{ModeSplit}
		}
		for _, m := range ms {
			_, p := simulate(t, Config{Mode: m}, arrs)
			st := p.Stats()
			if st.InRateCV == 0 || st.OutRateCV > 0.3*st.InRateCV {
				t.Errorf("%s/%s: rate CV in %.2f, out %.2f: want at least 70%% lower", tr.Name, m, st.InRateCV, st.OutRateCV)
			}
			t.Logf("%s/%s: %s", tr.Name, m, st.Report)
		}
	}
}

// A stream whose events come further apart than min_interval is already
// smooth: it passes byte for byte, with no delay.
func TestSmoothStreamPassesUnchanged(t *testing.T) {
	tr, ok := traces.ByName("steady")
	if !ok {
		t.Fatal("no steady trace")
	}
	arrs := arrivalsOf(t, tr)
	for _, m := range []Mode{ModePace, ModeSplit} {
		ems, _ := simulate(t, Config{Mode: m}, arrs)
		var in, out bytes.Buffer
		for _, a := range arrs {
			in.Write(a.ev.Raw)
		}
		for _, e := range ems {
			out.Write(e.raw)
		}
		if !bytes.Equal(in.Bytes(), out.Bytes()) {
			t.Fatalf("%s: steady stream was changed", m)
		}
		outAt := eventTimes(ems)
		if len(outAt) != len(arrs) {
			t.Fatalf("%s: %d events became %d", m, len(arrs), len(outAt))
		}
		for i := range outAt {
			if outAt[i] != arrs[i].at {
				t.Fatalf("%s: event %d arrived at %v, left at %v", m, i, arrs[i].at, outAt[i])
			}
		}
	}
}

// chunkEvent renders one OpenAI content (or reasoning) delta.
func chunkEvent(field, text string) sse.Event {
	b, _ := json.Marshal(text)
	raw := fmt.Sprintf(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{%q:%s},"logprobs":null,"finish_reason":null}]}`+"\n\n", field, b)
	return parseOne(raw)
}

func parseOne(raw string) sse.Event {
	ev, err := sse.NewReader(strings.NewReader(raw), 0).Next()
	if err != nil {
		panic(err)
	}
	return ev.Clone()
}

// A large delta is split into several events, each cut where a word or
// at least a grapheme cluster ends, never inside a UTF-8 sequence.
func TestLargeDeltaIsSplitAtBoundaries(t *testing.T) {
	texts := map[string]string{
		"words":  strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40),
		"cjk":    strings.Repeat("这是一个没有空格的中文句子，用来测试分割。", 30),
		"emoji":  strings.Repeat("👨‍👩‍👧‍👦🇯🇵👍🏽e\u0301 ", 60),
		"base64": strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0", 60),
	}
	for name, text := range texts {
		p := NewPacer(Config{Mode: ModePace})
		ev := chunkEvent("content", text)
		p.Push(&ev, t0)
		done := parseOne("data: [DONE]\n\n")
		p.Push(&done, t0.Add(time.Second))
		p.End(t0.Add(time.Second))
		var pieces []string
		now := t0
		for range 10000 {
			out, wake := p.Next(now)
			rd := sse.NewReader(bytes.NewReader(out), 0)
			for {
				e, err := rd.Next()
				if err != nil {
					break
				}
				if e.IsDone() {
					continue
				}
				var c struct {
					Choices []struct {
						Delta struct {
							Content string `json:"content"`
						} `json:"delta"`
					} `json:"choices"`
				}
				if err := json.Unmarshal(e.Data, &c); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				pieces = append(pieces, c.Choices[0].Delta.Content)
			}
			if wake.IsZero() {
				break
			}
			now = wake
		}
		if got := strings.Join(pieces, ""); got != text {
			t.Fatalf("%s: pieces do not join to the text", name)
		}
		if len(pieces) < 5 {
			t.Fatalf("%s: a %d-rune delta became only %d events", name, utf8.RuneCountInString(text), len(pieces))
		}
		for i, pc := range pieces[:len(pieces)-1] {
			if !utf8.ValidString(pc) {
				t.Fatalf("%s: piece %d is not valid UTF-8", name, i)
			}
			if !graphemeBoundary(text, len(strings.Join(pieces[:i+1], ""))) {
				t.Fatalf("%s: piece %d ends inside a grapheme cluster: %q", name, i, pc)
			}
			if name == "words" && !strings.HasSuffix(pc, " ") {
				t.Errorf("%s: piece %d does not end after a word and its space: %q", name, i, pc)
			}
		}
	}
}

// eventTimes lists the time each emitted block left.
func eventTimes(ems []emission) []time.Duration {
	var ats []time.Duration
	for _, e := range ems {
		rd := sse.NewReader(bytes.NewReader(e.raw), 0)
		for {
			if _, err := rd.Next(); err != nil {
				break
			}
			ats = append(ats, e.at)
		}
	}
	return ats
}
