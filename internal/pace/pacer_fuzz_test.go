package pace

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// FuzzPacerByteExact: any UTF-8 text, cut into deltas at random rune
// offsets (so a delta may even split a grapheme cluster, as upstreams do),
// spread over two channels, arriving at random times, comes out of every
// mode byte-exact and in order per channel, within the delay bound.
func FuzzPacerByteExact(f *testing.F) {
	f.Add("Hello, world! This is a test of the pacer.", uint64(1))
	f.Add("这是一个没有空格的中文句子，用来测试分割。👨‍👩‍👧‍👦🇯🇵👍🏽e\u0301", uint64(2))
	f.Add(strings.Repeat("QUJDREVGR0hJSktMTU5PUFFS", 20), uint64(3))
	f.Add("<b>&amp;</b>\n\t\"quoted\" \\ back\u2028slash\u0000", uint64(4))
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		if !utf8.ValidString(text) || text == "" || len(text) > 4096 {
			t.Skip()
		}
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		runes := []rune(text)
		var arrs []arrival
		var want [2]strings.Builder // answer, reasoning
		at := time.Duration(0)
		reasoning := rng.IntN(2) == 0
		for i := 0; i < len(runes); {
			n := 1 + rng.IntN(min(len(runes)-i, 1+rng.IntN(64)))
			piece := string(runes[i : i+n])
			i += n
			if rng.IntN(8) == 0 {
				reasoning = !reasoning
			}
			if rng.IntN(3) == 0 {
				at += time.Duration(rng.IntN(1500)) * time.Millisecond
			}
			field := "content"
			if reasoning {
				field = "reasoning_content"
				want[1].WriteString(piece)
			} else {
				want[0].WriteString(piece)
			}
			arrs = append(arrs, arrival{at: at, ev: chunkEvent(field, piece)})
		}
		done, err := sse.NewReader(strings.NewReader("data: [DONE]\n\n"), 0).Next()
		if err != nil {
			t.Fatal(err)
		}
		arrs = append(arrs, arrival{at: at, ev: done.Clone()})

		// Every mode, and split-reasoning with a split ratio drawn from
		// the seed (0 and 1 included): the ratio never breaks a bound.
		ratio := min(float64(seed%12)/10, 1)
		cfgs := []Config{{Mode: ModeSplit, SplitRatio: &ratio}}
		for _, m := range modes {
			cfgs = append(cfgs, Config{Mode: m})
		}
		for _, cfg := range cfgs {
			m := cfg.Mode
			cfg = cfg.withDefaults()
			ems, _ := simulate(t, cfg, arrs)
			var got [2]strings.Builder
			for _, e := range ems {
				rd := sse.NewReader(strings.NewReader(string(e.raw)), 0)
				for {
					ev, err := rd.Next()
					if err != nil {
						break
					}
					if ev.IsDone() {
						continue
					}
					var c struct {
						Choices []struct {
							Delta map[string]*string `json:"delta"`
						} `json:"choices"`
					}
					if err := json.Unmarshal(ev.Data, &c); err != nil || len(c.Choices) != 1 {
						t.Fatalf("%s: bad output event %q: %v", m, ev.Data, err)
					}
					d := c.Choices[0].Delta
					if s := d["content"]; s != nil {
						got[0].WriteString(*s)
					}
					if s := d["reasoning_content"]; s != nil {
						got[1].WriteString(*s)
					}
				}
			}
			if got[0].String() != want[0].String() || got[1].String() != want[1].String() {
				t.Fatalf("%s: output differs from input\nanswer    got %q\n          want %q\nreasoning got %q\n          want %q",
					m, got[0].String(), want[0].String(), got[1].String(), want[1].String())
			}
			in, out := inputTimes(t, arrs), outputTimes(t, ems)
			bound := cfg.MaxDelay
			if m == ModeSplit {
				bound = cfg.ReasoningMaxDelay
			}
			if l := maxLag(in.answer, out.answer); l > cfg.MaxDelay {
				t.Fatalf("%s: answer held %v", m, l)
			}
			if l := maxLag(in.reasoning, out.reasoning); l > bound {
				t.Fatalf("%s: reasoning held %v", m, l)
			}
		}
	})
}
