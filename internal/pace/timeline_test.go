package pace

import (
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
		tl.add(t0.Add(time.Duration(i)*time.Millisecond), i%2 == 1, LaneAnswer)
	}
	if len(tl.Marks) != MaxMarks || tl.Dropped != 10 {
		t.Fatalf("%d marks kept, %d dropped; want %d and 10", len(tl.Marks), tl.Dropped, MaxMarks)
	}
	var nilTL *Timeline
	nilTL.add(t0, false, LaneOther) // records nothing, does not panic
}
