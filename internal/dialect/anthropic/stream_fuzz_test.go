package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// checkTranslated reads a translated stream to its end (bounded) and
// checks what holds for any input: every event's data valid JSON or
// [DONE], nothing after the terminator ("" for [DONE], else an event
// type), and the terminator only when the input had one.
func checkTranslated(src sse.Source, terminator string, inputHasEnd bool) error {
	ended := false
	for i := 0; i <= 1<<16; i++ {
		ev, err := src.Next()
		if err != nil {
			return nil
		}
		if ended {
			return fmt.Errorf("event after the terminator: %q", ev.Raw)
		}
		if !ev.HasData || ev.Unterminated {
			return fmt.Errorf("event without data or unterminated: %q", ev.Raw)
		}
		if !reflect.DeepEqual(ev, sse.NewEvent(ev.Type, ev.Data)) {
			return fmt.Errorf("event not as sse.NewEvent makes it: %+v", ev)
		}
		if !ev.IsDone() && !json.Valid(ev.Data) {
			return fmt.Errorf("data is not JSON: %q", ev.Data)
		}
		if terminator == "" && ev.IsDone() || terminator != "" && ev.Type == terminator {
			if !inputHasEnd {
				return fmt.Errorf("terminator %q made up", ev.Raw)
			}
			ended = true
		}
	}
	return errors.New("stream does not end")
}

func FuzzChatStream(f *testing.F) {
	f.Add([]byte(wholeMessages), true)
	f.Add([]byte(wholeMessages[:len(wholeMessages)/2]), false)
	f.Add([]byte(msgEv("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)), true)
	f.Add([]byte("event: message_stop\ndata: {\"type\":\"message_stop\"}"), false)
	f.Add([]byte(msgBlockDelta("0", `{"type":"text_delta","text":"\ud800 bad surrogate"}`)+": c\n\ndata: [DONE]\n\n"), true)
	f.Add([]byte(msgBlockStart("7", `{"type":"tool_use","id":1,"name":null}`)+msgBlockDelta("7", `{"type":"input_json_delta","partial_json":"\u0000"}`)), false)
	f.Add([]byte("data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":\"x\"}}\r\r"), true)
	f.Fuzz(func(t *testing.T, in []byte, usage bool) {
		src := sse.NewReader(strings.NewReader(string(in)), 1<<16)
		if err := checkTranslated(ToChatStream(src, chat.Options{IncludeUsage: usage, Model: "m\n\""}), "", strings.Contains(string(in), "message_stop")); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzMessagesStream(f *testing.F) {
	f.Add([]byte(wholeChat))
	f.Add([]byte(wholeChat[:len(wholeChat)/2]))
	f.Add([]byte(chatEv(`{"error":{"message":"boom","type":"server_error","code":"overloaded_error"}}`)))
	f.Add([]byte(chatEv(`{"object":"error","message":5}`) + "data: [DONE]"))
	f.Add([]byte(cc(`"tool_calls":[{"index":1},{"index":0,"function":{"arguments":"\ud83d"}},{"index":1}]`) + ccDone))
	f.Add([]byte(cc(`"content":"\xff\xfe","reasoning":"a"`) + chatEv(`{"choices":[{"delta":null,"finish_reason":7}],"usage":{"prompt_tokens":-5}}`)))
	f.Add([]byte("event: error\n\nevent: error\ndata: \n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		src := sse.NewReader(strings.NewReader(string(in)), 1<<16)
		if err := checkTranslated(FromChatStream(src, chat.Options{Model: "m\u2028", InputTokens: 3}), "message_stop", strings.Contains(string(in), "[DONE]")); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCheckTranslatedCatches: the fuzz check does fail.
func TestCheckTranslatedCatches(t *testing.T) {
	stop := msgEv("message_stop", `{"type":"message_stop"}`)
	if err := checkTranslated(ToChatStream(sse.NewReader(strings.NewReader(stop), 0), chat.Options{}), "", false); err == nil {
		t.Error("a [DONE] with no message_stop in the input was not caught")
	}
	if err := checkTranslated(ToChatStream(sse.NewReader(strings.NewReader(stop), 0), chat.Options{}), "", true); err != nil {
		t.Error(err)
	}
	if err := checkTranslated(sse.NewReader(strings.NewReader(ccDone+ccDone), 0), "", true); err == nil {
		t.Error("an event after [DONE] was not caught")
	}
	if err := checkTranslated(sse.NewReader(strings.NewReader("data: {\n\n"), 0), "", true); err == nil {
		t.Error("data that is not JSON was not caught")
	}
}
