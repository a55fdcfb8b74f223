package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// chunk is a Chat stream data event.
// (data is compacted first: a raw string literal may span lines).
func chunk(data string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(data)); err != nil {
		panic(err)
	}
	return "data: " + b.String() + "\n\n"
}

const chunkHead = `{"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1700000000,"model":"m1","choices":[`

// delta is a chunk of choice 0 with this delta and finish_reason.
func delta(d, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return chunk(chunkHead + `{"index":0,"delta":` + d + `,"logprobs":null,"finish_reason":` + f + `}]}`)
}

var (
	usageChunk = chunk(`{"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1700000000,"model":"m1","choices":[],` + usageChat + `}`)
	doneChunk  = "data: [DONE]\n\n"
)

// runStream translates in and returns the events and the final error.
func runStream(t testing.TB, in string, opt chat.Options) ([]sse.Event, error) {
	t.Helper()
	src := FromChatStream(sse.NewReader(strings.NewReader(in), 1<<20), opt)
	var evs []sse.Event
	for range 100000 {
		ev, err := src.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev.Clone())
	}
	t.Fatal("the stream did not end")
	return nil, nil
}

// checkEvents checks what every Responses stream must be: each event is
// what sse.NewEvent makes, its data a JSON object whose type is the
// event's, sequence_number counts from 0, and nothing follows a
// terminator (response.completed, .incomplete, .failed).
func checkEvents(t testing.TB, evs []sse.Event) {
	t.Helper()
	ended := false
	ids := map[string]bool{} // output items' ids: unique in a response
	for i, ev := range evs {
		if want := sse.NewEvent(ev.Type, ev.Data); !reflect.DeepEqual(ev, want) {
			t.Fatalf("event %d is not the block sse.NewEvent makes:\n%q\n%q", i, ev.Raw, want.Raw)
		}
		var d struct {
			Type string `json:"type"`
			Seq  *int   `json:"sequence_number"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatalf("event %d: data is not JSON: %v: %s", i, err, ev.Data)
		}
		if d.Type != ev.Type || d.Seq == nil || *d.Seq != i {
			t.Fatalf("event %d: type %q (event %q), sequence_number %v: %s", i, d.Type, ev.Type, d.Seq, ev.Data)
		}
		if ended {
			t.Fatalf("event %d (%s) after the terminator", i, ev.Type)
		}
		if ev.Type == evItemAdded {
			var a struct {
				OutputIndex int `json:"output_index"`
				Item        struct{ ID string }
			}
			_ = json.Unmarshal(ev.Data, &a)
			if ids[a.Item.ID] || a.OutputIndex != len(ids) {
				t.Fatalf("event %d: item id %q again, or output_index %d is not %d", i, a.Item.ID, a.OutputIndex, len(ids))
			}
			ids[a.Item.ID] = true
		}
		switch ev.Type {
		case evCompleted, evIncomplete, evFailed:
			ended = true
		}
	}
}

// types lists the events' types.
func types(evs []sse.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// findEvent returns the data of the first event of type typ.
func findEvent(evs []sse.Event, typ string) []byte {
	for _, ev := range evs {
		if ev.Type == typ {
			return ev.Data
		}
	}
	return nil
}

func wantEOF(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want io.EOF", err)
	}
}
