package responses

import (
	"encoding/json"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// TestPauseTurnIsIncomplete: the finish_reason "pause_turn" (Anthropic's
// paused turn, carried by anthropic.ToChatStream and ToChatResponse for
// a Responses client) ends the response incomplete with reason
// pause_turn, whole and streamed (issue 25). Failed before: completed.
func TestPauseTurnIsIncomplete(t *testing.T) {
	out, err := FromChatResponse([]byte(completion(`{"role":"assistant","content":"Searching"}`, "pause_turn", usageChat)), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Status            string          `json:"status"`
		IncompleteDetails json.RawMessage `json:"incomplete_details"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Status != "incomplete" || string(r.IncompleteDetails) != `{"reason":"pause_turn"}` {
		t.Fatalf("whole: %v %+v", err, r)
	}

	evs, err := runStream(t, delta(`{"role":"assistant","content":"Searching"}`, "")+delta(`{}`, "pause_turn")+usageChunk+doneChunk, chat.Options{})
	wantEOF(t, err)
	checkEvents(t, evs)
	last := evs[len(evs)-1]
	if last.Type != "response.incomplete" {
		t.Fatalf("stream ends with %s, want response.incomplete", last.Type)
	}
	var ev struct {
		Response struct {
			IncompleteDetails json.RawMessage `json:"incomplete_details"`
		} `json:"response"`
	}
	if err := json.Unmarshal(last.Data, &ev); err != nil || string(ev.Response.IncompleteDetails) != `{"reason":"pause_turn"}` {
		t.Fatalf("stream: %v %s", err, last.Data)
	}
}
