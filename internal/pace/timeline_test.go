package pace

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

// TestTimelineMarksEveryEvent: in every mode and on every trace, the
// timeline has one arrival mark per event in and one emission mark per
// event out (what the log line counts), heartbeats apart, in time order
// per side, with a lane on each text event.
func TestTimelineMarksEveryEvent(t *testing.T) {
	for _, tr := range traces.All() {
		for _, m := range modes {
			synctest.Test(t, func(t *testing.T) {
				tl := &Timeline{}
				res, _ := runTrace(t, Config{Mode: m, Heartbeat: time.Second, Timeline: tl}, tr.Steps, &clientOut{})
				r := res.Stats.Report
				if in, out := tl.Count(false), tl.Count(true); in != r.EventsIn || out != r.EventsOut {
					t.Fatalf("%s/%s: %d arrival and %d emission marks, want %d and %d", tr.Name, m, in, out, r.EventsIn, r.EventsOut)
				}
				var last [2]time.Duration
				text := 0
				for _, mk := range tl.Marks {
					side := 0
					if mk.Out {
						side = 1
					}
					if mk.At < last[side] {
						t.Fatalf("%s/%s: marks out of order: %v after %v", tr.Name, m, mk.At, last[side])
					}
					last[side] = mk.At
					if mk.Lane == LaneReasoning || mk.Lane == LaneAnswer {
						text++
					}
				}
				if r.RunesIn > 0 && text == 0 {
					t.Fatalf("%s/%s: text arrived, no mark has a text lane", tr.Name, m)
				}
			})
		}
	}
}

func TestTimelineBounded(t *testing.T) {
	tl := &Timeline{}
	t0 := time.Unix(1_800_000_000, 0)
	for i := range MaxMarks + 10 {
		tl.add(t0.Add(time.Duration(i)*time.Millisecond), i%2 == 1, LaneAnswer, 1)
	}
	if len(tl.Marks) != MaxMarks || tl.Dropped != 10 {
		t.Fatalf("%d marks kept, %d dropped; want %d and 10", len(tl.Marks), tl.Dropped, MaxMarks)
	}
	var nilTL *Timeline
	nilTL.add(t0, false, LaneOther, 0) // records nothing, does not panic
}

func TestClusterRate(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	even, late := &Timeline{}, &Timeline{}
	for i := range 10 { // 10 runes every 100ms over 900ms
		even.add(t0.Add(time.Duration(i)*100*time.Millisecond), false, LaneReasoning, 10)
	}
	// A few runes early, then a cluster near the end.
	late.add(t0, false, LaneReasoning, 10)
	late.add(t0.Add(100*time.Millisecond), false, LaneReasoning, 10)
	late.add(t0.Add(800*time.Millisecond), false, LaneReasoning, 40)
	late.add(t0.Add(900*time.Millisecond), false, LaneReasoning, 40)
	late.add(t0.Add(950*time.Millisecond), false, LaneAnswer, 100) // the answer does not count
	if r, ok := even.ClusterRate(false); !ok || r != 0.5 {
		t.Errorf("even flow: %v %v, want 0.5", r, ok)
	}
	if r, ok := late.ClusterRate(false); !ok || r != 0.8 {
		t.Errorf("clustered late: %v %v, want 0.8", r, ok)
	}
	if _, ok := late.ClusterRate(true); ok {
		t.Error("no reasoning sent, yet a rate out")
	}
	one := &Timeline{}
	one.add(t0, false, LaneReasoning, 5)
	if _, ok := one.ClusterRate(false); ok {
		t.Error("one reasoning event, yet a rate")
	}
}

// TestClustersOnTraces: in every mode, a stream with reasoning gets both
// cluster rates, within (0, 1); one without gets none. (Periodic clusters,
// as in the reasoning-clustered trace, score about 0.5 in: the figure
// measures reasoning crowding late, not bursts.)
func TestClustersOnTraces(t *testing.T) {
	for _, tr := range traces.All() {
		for _, m := range modes {
			synctest.Test(t, func(t *testing.T) {
				tl := &Timeline{}
				runTrace(t, Config{Mode: m, Timeline: tl}, tr.Steps, &clientOut{})
				c := tl.Clusters()
				reasoning := strings.HasPrefix(tr.Name, "reasoning")
				if c.Known != reasoning {
					t.Fatalf("%s/%s: clusters %+v; reasoning trace %v", tr.Name, m, c, reasoning)
				}
				if c.Known && (c.In <= 0 || c.In >= 1 || c.Out <= 0 || c.Out >= 1) {
					t.Fatalf("%s/%s: clusters %+v out of (0, 1)", tr.Name, m, c)
				}
			})
		}
	}
}
