package llmrelay

import (
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// hookSource is a Source that takes the pacer's per-read hook.
type hookSource struct {
	eventList
	hooked bool
}

func (h *hookSource) BeforeRead(func()) { h.hooked = true }

// TestTraceTapKeepsThePacersHooks: the tap a traced stream reads through
// passes on the pacer's per-read hook (without it the pacer flushes every
// event: pace.Run) and a usage meter's count (pace.RuneCounted).
func TestTraceTapKeepsThePacersHooks(t *testing.T) {
	src := &hookSource{}
	tap := &traceTap{src: src, tr: &requestTrace{}}
	if !sse.ForwardBeforeRead(tap, func() {}) || !src.hooked {
		t.Error("the per-read hook did not reach the source under the tap")
	}
	m := newUsageMeter(&eventList{}, func() int { return 0 })
	var rc pace.RuneCounted = &traceTap{src: m, tr: &requestTrace{}}
	rc.CountedBy(func() int { return 9 })
	if m.counted == nil || m.counted() != 9 {
		t.Error("the pacer's count did not reach the meter under the tap")
	}
}
