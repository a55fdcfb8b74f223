package pace

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

// TestRunBareCRStreamsEndInLF: the relay reads upstreams with
// sse.Reader.NormalizeLineEndings. Then, for upstreams whose line endings
// are lone CRs (all of them, or the blank line after an LF: "\n\r"), every
// write Run makes ends in LF and the client gets no bare CR, in every mode:
// blocks forwarded as they are, deltas merged or split and re-encoded,
// reasoning stripped, heartbeats. Whatever the relay writes after Run (its
// in-band error event) therefore starts on a fresh line.
func TestRunBareCRStreamsEndInLF(t *testing.T) {
	toCR := func(b []byte) []byte {
		return bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\r")), []byte("\n"), []byte("\r"))
	}
	toLFCR := func(b []byte) []byte {
		return bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\n\n"), []byte("\n\r"))
	}
	convs := []struct {
		name string
		f    func([]byte) []byte
	}{{"cr", toCR}, {"lf-cr", toLFCR}}
	cfgs := []Config{
		{Mode: ModeOff, Heartbeat: time.Second},
		{Mode: ModePace, Heartbeat: time.Second},
		{Mode: ModeSplit, Heartbeat: time.Second},
		{Mode: ModePace, Heartbeat: time.Second, HideReasoning: true},
	}
	for _, tr := range traces.All() {
		for _, conv := range convs {
			for _, cfg := range cfgs {
				name := tr.Name + "/" + conv.name + "/" + cfg.Mode.String()
				if cfg.HideReasoning {
					name += "/hide"
				}
				synctest.Test(t, func(t *testing.T) {
					var steps []traces.Step
					for _, s := range tr.Steps {
						steps = append(steps, traces.Step{At: s.At, Raw: conv.f(s.Raw)})
					}
					// A pause before the last step: heartbeats follow
					// an upstream block.
					steps[len(steps)-1].At += 3 * time.Second
					out := &clientOut{}
					runTraceNormalized(t, cfg, steps, out)
					beats := 0
					for i, w := range out.writes {
						if !bytes.HasSuffix(w.raw, []byte("\n")) {
							t.Fatalf("%s: write %d does not end in LF: %q", name, i, w.raw)
						}
						if string(w.raw) == string(HeartbeatEvent) {
							beats++
						}
					}
					if bytes.Contains(bytes.ReplaceAll(out.buf.Bytes(), []byte("\r\n"), nil), []byte("\r")) {
						t.Fatalf("%s: the client got a bare CR", name)
					}
					if beats == 0 && cfg.Mode == ModeOff {
						t.Errorf("%s: no heartbeat in the 3 s pause", name)
					}
					got := transcriptOf(t, out.writes)
					sentR, sentA := tr.Sent()
					if string(got.Answer) != sentA {
						t.Errorf("%s: answer differs", name)
					}
					if !cfg.HideReasoning && string(got.Reasoning) != sentR {
						t.Errorf("%s: reasoning differs", name)
					}
				})
			}
		}
	}
}

// runTraceNormalized is runTrace with a reader that normalises line
// endings, as the relay's.
func runTraceNormalized(t *testing.T, cfg Config, steps []traces.Step, out *clientOut) Result {
	t.Helper()
	body := newStepBody(steps)
	out.start = body.start
	rd := sse.NewReader(body, 0).NormalizeLineEndings()
	var first []sse.Event
	for {
		ev, err := rd.Next()
		if err != nil {
			t.Fatalf("no first data event: %v", err)
		}
		first = append(first, ev.Clone())
		if ev.HasData {
			break
		}
	}
	return Run(context.Background(), cfg, first, rd, out, body.abort)
}
