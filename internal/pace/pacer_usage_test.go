package pace

import (
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// TestUsageObjectSpacedOut: a usage chunk whose JSON puts blanks around
// the colon (a pretty-printing server) is read as the usage, as one
// written compactly is; `"usage":null` on a text chunk is none. The
// look for it used to match only `"usage":{` and `"usage": {`.
func TestUsageObjectSpacedOut(t *testing.T) {
	for _, data := range []string{
		`{"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`,
		"{\"id\":\"c\",\"choices\":[],\"usage\" :\n  {\"prompt_tokens\":3,\"completion_tokens\":5,\"total_tokens\":8}}",
	} {
		p := NewPacer(Config{})
		now := time.Now()
		text := sse.NewEvent("", []byte(`{"id":"c","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":null}`))
		p.Push(&text, now)
		ev := sse.NewEvent("", []byte(data))
		p.Push(&ev, now)
		if u := string(p.Stats().Usage); u != `{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}` {
			t.Errorf("%q: usage %q", data, u)
		}
	}
}
