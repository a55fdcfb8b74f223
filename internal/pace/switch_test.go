package pace

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/smoothness"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

// switchArrivals is a stream whose reasoning comes in bursts of 20
// tokens every 300 ms, then one burst whose first rsn tokens end the
// reasoning and whose others begin the answer, then the answer in bursts
// of 20 every 250 ms; each burst read in four pieces within 5 ms.
func switchArrivals(rsn int) []arrival {
	words := []string{" the", " relay", " streams", " a", " model's", " answer", ",", " then", " it", " waits", "."}
	var arrs []arrival
	arrs = append(arrs, arrival{0, parseOne(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")})
	n := 0
	burst := func(at time.Duration, reasoning func(i int) bool) {
		for i := range 20 {
			field := "content"
			if reasoning(i) {
				field = "reasoning_content"
			}
			arrs = append(arrs, arrival{at + 5*time.Millisecond*time.Duration(i/5)/3, chunkEvent(field, words[n%len(words)])})
			n++
		}
	}
	at := 50 * time.Millisecond
	for range 8 {
		burst(at, func(int) bool { return true })
		at += 300 * time.Millisecond
	}
	burst(at, func(i int) bool { return i < rsn })
	for range 10 {
		at += 250 * time.Millisecond
		burst(at, func(int) bool { return false })
	}
	at += 250 * time.Millisecond
	arrs = append(arrs,
		arrival{at, parseOne(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}` + "\n\n")},
		arrival{at, parseOne("data: [DONE]\n\n")})
	return arrs
}

// answerRunes returns the answer runes a block carries.
func answerRunes(t *testing.T, ev sse.Event) int {
	t.Helper()
	if !ev.HasData || ev.IsDone() {
		return 0
	}
	pieces, err := new(traces.Transcript).Add(ev.Data)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pieces {
		if !p.Reasoning {
			n += p.Runes()
		}
	}
	return n
}

// In split-reasoning, when the switch from reasoning to answer falls
// inside a burst, the answer lane starts with a sliver of a burst and the
// cadence the reasoning lane measured (300 ms, where the answer's is
// 250 ms). Wherever the switch falls, the answer reads as steadily as
// when it starts on a burst of its own: its windowed rate CV at least
// 80 % below the input's, no gap of more than 250 ms between its pieces
// (the stall a reader sees as the answer stopping), and no answer text
// held longer than MaxDelay. Spread over a whole inherited gap, the
// sliver once trickled out at a fraction of the answer's rate, with a
// 267 ms gap before the next burst's text (-76 % with 17 reasoning
// tokens in the switching burst).
func TestAnswerAfterAMidBurstSwitch(t *testing.T) {
	cfg := Config{Mode: ModeSplit}.withDefaults()
	for rsn := 1; rsn < 20; rsn++ {
		arrs := switchArrivals(rsn)
		ems, _ := simulate(t, cfg, arrs)

		rec := smoothness.New()
		rec.SetMaxDelay(cfg.MaxDelay)
		type ev struct {
			at    time.Duration
			out   bool
			runes int
		}
		var evs []ev
		for _, a := range arrs {
			if n := answerRunes(t, a.ev); n > 0 {
				evs = append(evs, ev{a.at, false, n})
			}
		}
		var outAt []time.Duration
		for _, e := range ems {
			rd := sse.NewReader(bytes.NewReader(e.raw), 0)
			for {
				b, err := rd.Next()
				if err != nil {
					break
				}
				if n := answerRunes(t, b); n > 0 {
					evs = append(evs, ev{e.at, true, n})
					outAt = append(outAt, e.at)
				}
			}
		}
		slices.SortStableFunc(evs, func(a, b ev) int { return int(a.at - b.at) })
		for _, e := range evs {
			if e.out {
				rec.Output(t0.Add(e.at), e.runes)
			} else {
				rec.Input(t0.Add(e.at), e.runes)
			}
		}
		r := rec.Report()
		t.Logf("switch after %2d reasoning tokens: answer rate CV %.2f -> %.2f", rsn, r.InRateCV, r.OutRateCV)
		if r.OutRateCV > 0.2*r.InRateCV {
			t.Errorf("switch after %d reasoning tokens: answer rate CV %.2f -> %.2f (%+.0f%%), want at least 80%% lower",
				rsn, r.InRateCV, r.OutRateCV, 100*(r.OutRateCV-r.InRateCV)/r.InRateCV)
		}
		for i := 1; i < len(outAt); i++ {
			if g := outAt[i] - outAt[i-1]; g > smoothness.StallThreshold {
				t.Errorf("switch after %d reasoning tokens: the answer stops for %v at %v", rsn, g, outAt[i-1])
			}
		}
		in, out := inputTimes(t, arrs), outputTimes(t, ems)
		if l := maxLag(in.answer, out.answer); l > cfg.MaxDelay {
			t.Errorf("switch after %d reasoning tokens: answer text held %v > %v", rsn, l, cfg.MaxDelay)
		}
	}
}
