package pace

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// The share alone: with both lanes always able to send, after n contested
// ticks the reasoning lane has sent within one emission of ratio×n; 0 and
// 1 give one lane every tick.
func TestShareFollowsRatio(t *testing.T) {
	for _, ratio := range []float64{0, 0.001, 0.1, 0.2, 1.0 / 3, 0.35, 0.5, 0.65, 0.8, 0.999, 1} {
		s := newShare(ratio)
		reasoning := 0
		for n := 1; n <= 10000; n++ {
			ln := s.next()
			s.took(ln)
			if ln == laneReasoning {
				reasoning++
			}
			if d := math.Abs(float64(reasoning) - ratio*float64(n)); d > 1 {
				t.Fatalf("ratio %v: after %d ticks %d went to reasoning, %.2f from the share", ratio, n, reasoning, d)
			}
		}
		switch ratio {
		case 0:
			if reasoning != 0 {
				t.Errorf("ratio 0: reasoning won %d contested ticks", reasoning)
			}
		case 1:
			if reasoning != 10000 {
				t.Errorf("ratio 1: answer won %d contested ticks", 10000-reasoning)
			}
		}
	}
}

// FuzzShare: whatever ticks a lane cannot use (it hands them to the other),
// the counter stays in its range, a lane owed nothing is never picked at
// the edges, and once both lanes can send again the running share comes
// back within two emissions of the ratio (the owed one, and the rounding).
func FuzzShare(f *testing.F) {
	f.Add(uint16(22937), uint64(1), uint16(300))
	f.Add(uint16(0), uint64(2), uint16(100))
	f.Add(uint16(65535), uint64(3), uint16(1000))
	f.Fuzz(func(t *testing.T, r uint16, seed uint64, blocked uint16) {
		ratio := float64(r) / math.MaxUint16
		s := newShare(ratio)
		rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
		for range int(blocked % 2000) {
			ln := s.next()
			if rng.IntN(3) == 0 {
				ln = 1 - ln // the picked lane had nothing to send
			}
			s.took(ln)
			if s.acc < 0 || s.acc >= shareScale {
				t.Fatalf("acc %d out of range", s.acc)
			}
		}
		reasoning := 0
		for n := 1; n <= 4000; n++ {
			ln := s.next()
			if (ratio == 0 && ln == laneReasoning) || (ratio == 1 && ln == laneAnswer) {
				t.Fatalf("ratio %v picked lane %d", ratio, ln)
			}
			s.took(ln)
			if ln == laneReasoning {
				reasoning++
			}
			if d := math.Abs(float64(reasoning) - ratio*float64(n)); d > 2 {
				t.Fatalf("ratio %v: after %d ticks %d went to reasoning, %.2f from the share", ratio, n, reasoning, d)
			}
		}
	})
}

// interleaved is a stream whose reasoning and answer both keep coming
// (a model that thinks between parts of its answer, or tool rounds):
// every 200 ms a burst of each, far more text than a tick carries, for
// secs seconds, then [DONE].
func interleaved(secs int) []arrival {
	var arrs []arrival
	words := strings.Fields(strings.Repeat("the quick brown fox jumps over the lazy dog ", 40))
	w := 0
	text := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(words[w%len(words)] + " ")
			w++
		}
		return b.String()
	}
	for at := time.Duration(0); at < time.Duration(secs)*time.Second; at += 200 * time.Millisecond {
		for k := range 4 {
			arrs = append(arrs, arrival{at: at + time.Duration(k)*time.Millisecond, ev: chunkEvent("reasoning_content", text(6))})
			arrs = append(arrs, arrival{at: at + time.Duration(k)*time.Millisecond, ev: chunkEvent("content", text(6))})
		}
	}
	return append(arrs, arrival{at: time.Duration(secs) * time.Second, ev: parseOne("data: [DONE]\n\n")})
}

// emissionShare counts, over the emissions while both lanes were sending
// (from the first of the later lane to the last of the earlier), the
// events that carry reasoning and those that carry answer text.
func emissionShare(t *testing.T, ems []emission) (reasoning, answer int) {
	t.Helper()
	type ev struct {
		at        time.Duration
		reasoning bool
	}
	var evs []ev
	for _, e := range ems {
		rd := sse.NewReader(bytes.NewReader(e.raw), 0)
		for {
			x, err := rd.Next()
			if err != nil {
				break
			}
			if !x.HasData || x.IsDone() {
				continue
			}
			var c struct {
				Choices []struct {
					Delta map[string]*string `json:"delta"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(x.Data, &c); err != nil || len(c.Choices) != 1 {
				t.Fatalf("bad event %q", x.Data)
			}
			_, r := c.Choices[0].Delta["reasoning_content"]
			evs = append(evs, ev{e.at, r})
		}
	}
	var first, last [2]time.Duration
	for i := range first {
		first[i], last[i] = -1, -1
	}
	for _, e := range evs {
		i := 0
		if e.reasoning {
			i = 1
		}
		if first[i] < 0 {
			first[i] = e.at
		}
		last[i] = e.at
	}
	from, to := max(first[0], first[1]), min(last[0], last[1])
	for _, e := range evs {
		if e.at < from || e.at > to {
			continue
		}
		if e.reasoning {
			reasoning++
		} else {
			answer++
		}
	}
	return reasoning, answer
}

// TestSplitRatioShare: on a stream whose lanes are both backlogged for
// ten seconds, the reasoning events' share of all text events is near
// the ratio, every rune keeps its lane's bound, and the text is the
// input's. At 0 and 1 the losing lane still sends what falls due (the
// bound wins), so the share there is not 0 or 1 but close to it. Without a ratio both lanes send at every tick, half and
// half, which the middle ratios are told apart from.
func TestSplitRatioShare(t *testing.T) {
	arrs := interleaved(10)
	in := inputTimes(t, arrs)
	want := inputTranscript(t, arrs)
	for _, ratio := range []float64{-1, 0, 0.2, 0.35, 0.5, 0.8, 1} {
		cfg := Config{Mode: ModeSplit}.withDefaults()
		if ratio >= 0 {
			cfg.SplitRatio = &ratio
		}
		ems, _ := simulate(t, cfg, arrs)
		sameContent(t, "split ratio", transcriptOf(t, ems), want)
		out := outputTimes(t, ems)
		if l := maxLag(in.answer, out.answer); l > cfg.MaxDelay {
			t.Errorf("ratio %v: answer held %v > max_delay %v", ratio, l, cfg.MaxDelay)
		}
		if l := maxLag(in.reasoning, out.reasoning); l > cfg.ReasoningMaxDelay {
			t.Errorf("ratio %v: reasoning held %v > reasoning_max_delay %v", ratio, l, cfg.ReasoningMaxDelay)
		}
		r, a := emissionShare(t, ems)
		got := float64(r) / float64(r+a)
		t.Logf("ratio %v: %d reasoning, %d answer events: share %.3f", ratio, r, a, got)
		switch {
		case r+a < 200:
			t.Errorf("ratio %v: only %d text events while both lanes sent", ratio, r+a)
		case ratio < 0 && math.Abs(got-0.5) > 0.1:
			t.Errorf("no ratio: reasoning share %.3f, want about half", got)
		case ratio == 0 && got > 0.25, ratio == 1 && got < 0.75:
			// At the edges the losing lane sends only what falls due:
			// on this stream, about one event in seven.
			t.Errorf("ratio %v: reasoning share %.3f", ratio, got)
		case ratio > 0 && ratio < 1 && math.Abs(got-ratio) > 0.05:
			// Within 0.05: without a yielded tick's credit (lane.accrue)
			// the share drifts towards half, 0.28 for 0.2, 0.41 for 0.35.
			t.Errorf("ratio %v: reasoning share %.3f", ratio, got)
		}
	}
}

// TestSplitRatioOtherModes: a ratio changes nothing outside split-reasoning.
func TestSplitRatioOtherModes(t *testing.T) {
	arrs := interleaved(3)
	ratio := 0.35
	for _, m := range []Mode{ModeOff, ModePace} {
		plain, _ := simulate(t, Config{Mode: m}, arrs)
		shared, _ := simulate(t, Config{Mode: m, SplitRatio: &ratio}, arrs)
		if len(plain) != len(shared) {
			t.Fatalf("%s: %d emissions without a ratio, %d with", m, len(plain), len(shared))
		}
		for i := range plain {
			if plain[i].at != shared[i].at || !bytes.Equal(plain[i].raw, shared[i].raw) {
				t.Fatalf("%s: emission %d differs with a ratio", m, i)
			}
		}
	}
}

// TestSplitRatioBoundWins: at ratio 0 the answer lane wins every contested
// tick, and here it never runs dry (a delta every 5 ms); the reasoning,
// which comes between, still leaves within its bound (here the reasoning
// drain), at the ticks where it falls due. And the reverse at ratio 1.
func TestSplitRatioBoundWins(t *testing.T) {
	for _, ratio := range []float64{0, 1} {
		var arrs []arrival
		for at := time.Duration(0); at < 5*time.Second; at += 5 * time.Millisecond {
			if at%(100*time.Millisecond) == 0 {
				arrs = append(arrs, arrival{at: at, ev: chunkEvent("reasoning_content", "a thought in between ")})
			}
			arrs = append(arrs, arrival{at: at, ev: chunkEvent("content", "flow of words ")})
		}
		arrs = append(arrs, arrival{at: 5 * time.Second, ev: parseOne("data: [DONE]\n\n")})
		cfg := Config{Mode: ModeSplit, SplitRatio: &ratio}.withDefaults()
		ems, _ := simulate(t, cfg, arrs)
		in, out := inputTimes(t, arrs), outputTimes(t, ems)
		if l := maxLag(in.answer, out.answer); l > cfg.MaxDelay {
			t.Errorf("ratio %v: answer held %v > max_delay %v", ratio, l, cfg.MaxDelay)
		}
		// Each reasoning delta has answer text right behind it, so its
		// bound is the reasoning drain (see Pacer.pushText).
		if l := maxLag(in.reasoning, out.reasoning); l > cfg.ReasoningDrain {
			t.Errorf("ratio %v: reasoning held %v > reasoning_drain %v", ratio, l, cfg.ReasoningDrain)
		}
		sameContent(t, "bound", transcriptOf(t, ems), inputTranscript(t, arrs))
	}
}
