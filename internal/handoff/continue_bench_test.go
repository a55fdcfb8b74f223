package handoff

import (
	"fmt"
	"strings"
	"testing"
)

// The continuation's body for a Messages conversation of about 100 KB
// (200 turns) and a 4 KB answer so far: part of the relay's own time from
// the break to the continuation's request (issue 30 asks for under 1 ms
// in all). answer-leg is Answer on the same body, for comparison: both
// are mostly encoding/json decoding and re-encoding the body's top level.
func BenchmarkContinue(b *testing.B) {
	var msgs []string
	for i := range 100 {
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"user","content":[{"type":"text","text":%q}]}`, strings.Repeat("question ", 50)+fmt.Sprint(i)),
			fmt.Sprintf(`{"role":"assistant","content":[{"type":"text","text":%q}]}`, strings.Repeat("answer ", 60)))
	}
	msgs = append(msgs, `{"role":"user","content":"and now?"}`)
	body := []byte(`{"model":"m","max_tokens":4096,"thinking":{"type":"adaptive"},"system":"s","messages":[` + strings.Join(msgs, ",") + `]}`)
	answer := strings.Repeat("word ", 800)
	for _, how := range []How{PrefillTurn, Instruct} {
		b.Run(how.String(), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := Continue(Messages, body, answer, how); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("answer-leg", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := Answer(Messages, body, answer, Prefill); err != nil {
				b.Fatal(err)
			}
		}
	})
}
