package responses

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// Random Chat streams: every translation is a well-formed Responses
// stream (checkEvents), ends in a terminator exactly when the input had
// [DONE] or an error, and its final response carries all the text.
func TestResponsesStreamRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"a", " b", "\"q\"", "\n", "é"}
	for iter := range 500 {
		var in strings.Builder
		var text, reasoning strings.Builder
		calls := 0
		for range rng.IntN(12) {
			w := words[rng.IntN(len(words))]
			switch rng.IntN(5) {
			case 0:
				in.WriteString(delta(`{"content":`+jsonStr(w)+`}`, ""))
				text.WriteString(w)
			case 1:
				in.WriteString(delta(`{"reasoning_content":`+jsonStr(w)+`}`, ""))
				reasoning.WriteString(w)
			case 2:
				in.WriteString(delta(`{"tool_calls":[{"index":`+strconv.Itoa(calls)+`,"id":"c","function":{"name":"f","arguments":"{}"}}]}`, ""))
				calls++
			case 3:
				in.WriteString(": ping\n\n")
			case 4:
				in.WriteString(usageChunk)
			}
		}
		end := rng.IntN(3)
		switch end {
		case 1:
			in.WriteString(delta(`{}`, "stop") + doneChunk)
		case 2:
			in.WriteString(chunk(`{"error":{"message":"x"}}`))
		}
		evs, err := runStream(t, in.String(), chat.Options{})
		wantEOF(t, err)
		checkEvents(t, evs)
		last := ""
		if len(evs) > 0 {
			last = evs[len(evs)-1].Type
		}
		want := map[int]string{0: "", 1: evCompleted, 2: evFailed}[end]
		if end == 0 && text.Len()+reasoning.Len()+calls > 0 {
			want = last // cut short: whatever delta came last, but no terminator
			if last == evCompleted || last == evFailed {
				t.Fatalf("iteration %d: terminator %s made up", iter, last)
			}
		}
		if last != want {
			t.Fatalf("iteration %d: last event %q, want %q: %q", iter, last, want, types(evs))
		}
		if end != 1 {
			continue
		}
		var d struct {
			Response struct {
				Output []struct {
					Type    string
					Content []struct{ Text string }
					Summary []struct{ Text string }
				}
			}
		}
		if err := json.Unmarshal(evs[len(evs)-1].Data, &d); err != nil {
			t.Fatal(err)
		}
		var gotText, gotReasoning strings.Builder
		nCalls := 0
		for _, it := range d.Response.Output {
			for _, c := range it.Content {
				gotText.WriteString(c.Text)
			}
			for _, s := range it.Summary {
				gotReasoning.WriteString(s.Text)
			}
			if it.Type == "function_call" {
				nCalls++
			}
		}
		if gotText.String() != text.String() || gotReasoning.String() != reasoning.String() || nCalls != calls {
			t.Fatalf("iteration %d: output text %q reasoning %q calls %d, want %q %q %d",
				iter, gotText.String(), gotReasoning.String(), nCalls, text.String(), reasoning.String(), calls)
		}
	}
}
