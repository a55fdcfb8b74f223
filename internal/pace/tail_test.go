package pace

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

// Mode off passes the stream to the end of the upstream's body, not only
// to its end event: OpenRouter ends its Responses streams with a
// `data: [DONE]` after response.completed, and whatever an upstream sends
// after message_stop or [DONE] is the client's as well (issue 34).
func TestRunOffPassesTheTail(t *testing.T) {
	for _, c := range []struct {
		name   string
		format Format
		body   string // up to and with the end event
		tail   string // what follows it
	}{
		{"responses then [DONE]", FormatResponses,
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"OK\",\"sequence_number\":4}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"usage\":{\"input_tokens\":12,\"output_tokens\":2}},\"sequence_number\":8}\n\n",
			"data: [DONE]\n\n"},
		{"messages then more", FormatMessages,
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			": trailing\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n"},
		{"chat then a comment", FormatChat,
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
			": end of stream\n\n"},
		{"an unterminated tail", FormatResponses,
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"OK\"}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\"}}\n\n",
			"data: [DONE]"},
	} {
		synctest.Test(t, func(t *testing.T) {
			steps := []traces.Step{{At: 0, Raw: []byte(c.body)}, {At: 300 * time.Millisecond, Raw: []byte(c.tail)}}
			out := &clientOut{}
			res, _ := runTrace(t, Config{Mode: ModeOff, Format: c.format, Tail: 2 * time.Second}, steps, out)
			if res.End != EndDone {
				t.Fatalf("%s: ended %v", c.name, res.End)
			}
			if got := out.buf.String(); got != c.body+c.tail {
				t.Fatalf("%s: the client got\n%q\nwant\n%q", c.name, got, c.body+c.tail)
			}
		})
	}
}

// An upstream that keeps its connection open after the end event holds
// the client for Tail at most: then the read is aborted and the stream
// ends complete.
func TestRunOffTailIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		done := "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\"}}\n\n"
		steps := []traces.Step{
			{At: 0, Raw: []byte("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"OK\"}\n\n" + done)},
			{At: 100 * time.Millisecond, Raw: []byte("data: [DONE]\n\n")},
			{At: time.Hour, Raw: []byte(": far too late\n\n")},
		}
		out := &clientOut{}
		start := time.Now()
		res, body := runTrace(t, Config{Mode: ModeOff, Format: FormatResponses, Tail: 2 * time.Second}, steps, out)
		if res.End != EndDone || time.Since(start) != 2*time.Second {
			t.Fatalf("ended %v after %v, want EndDone after the 2s tail bound", res.End, time.Since(start))
		}
		select {
		case <-body.aborted:
		default:
			t.Fatal("the upstream read was not aborted")
		}
		if got := out.buf.String(); !strings.HasSuffix(got, done+"data: [DONE]\n\n") || strings.Contains(got, "too late") {
			t.Fatalf("the client got %q", got)
		}
	})
}

// The tail is bounded in bytes too: an upstream that streams on after its
// end event is cut at TailBytes.
func TestRunOffTailBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		steps := []traces.Step{{At: 0, Raw: []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")}}
		for i := range 100 {
			steps = append(steps, traces.Step{At: time.Duration(i+1) * time.Millisecond, Raw: []byte(": " + strings.Repeat("x", 1000) + "\n\n")})
		}
		out := &clientOut{}
		res, _ := runTrace(t, Config{Mode: ModeOff, Tail: time.Minute, TailBytes: 10 << 10}, steps, out)
		tail := len(out.buf.String()) - len(steps[0].Raw)
		if res.End != EndDone || tail < 10<<10 || tail > 10<<10+1004 {
			t.Fatalf("ended %v with %d bytes of tail, want about 10 KiB", res.End, tail)
		}
	})
}

// Without Tail (paced modes, translated streams) the stream ends at its
// end event, as before.
func TestRunStopsAtTheEndEventWithoutTail(t *testing.T) {
	for _, m := range modes {
		synctest.Test(t, func(t *testing.T) {
			steps := []traces.Step{{At: 0, Raw: []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")},
				{At: time.Millisecond, Raw: []byte(": after\n\n")}}
			out := &clientOut{}
			res, _ := runTrace(t, Config{Mode: m}, steps, out)
			if res.End != EndDone || strings.Contains(out.buf.String(), "after") {
				t.Fatalf("%s: ended %v, client got %q", m, res.End, out.buf.String())
			}
		})
	}
}

// A Chat stream whose only usage is a provider's own member (Groq's
// x_groq.usage, Moonshot's usage in the choice) is accounted from it; a
// standard usage object wins over it whichever comes first.
func TestChatUsageFromProviderMembers(t *testing.T) {
	const groqFinish = `{"id":"chatcmpl-e7f8e220-656c-4455-a132-dacfc1370798","object":"chat.completion.chunk","created":1729171479,"model":"gemma2-9b-it","system_fingerprint":"fp_10c08bf97d","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"x_groq":{"id":"req_01jadadp0femyae9kav1gpkhe8","usage":{"queue_time":0.061348671,"prompt_tokens":18,"prompt_time":0.000211569,"completion_tokens":439,"completion_time":0.798181818,"total_tokens":457,"total_time":0.798393387}}}`
	const kimiFinish = `{"id":"chatcmpl-6a8de8b0aa0c275363b2fc8a","object":"chat.completion.chunk","created":1787685040,"model":"kimi-k2.5","choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"completion_tokens_details":{"reasoning_tokens":1}}}],"system_fingerprint":"fpv0_1c3effa9"}`
	const standard = `{"choices":[],"usage":{"prompt_tokens":99,"completion_tokens":33,"total_tokens":132}}`
	text := `{"choices":[{"index":0,"delta":{"content":"OK"}}]}`
	for _, c := range []struct {
		name   string
		chunks []string
		want   string
	}{
		{"groq", []string{text, groqFinish}, `"completion_tokens":439`},
		{"kimi", []string{text, kimiFinish}, `"completion_tokens":5`},
		{"standard after", []string{text, kimiFinish, standard}, `"completion_tokens":33`},
		{"standard before", []string{text, standard, groqFinish}, `"completion_tokens":33`},
	} {
		for _, m := range modes {
			p := NewPacer(Config{Mode: m, DropUsage: true})
			now := time.Now()
			for _, d := range append(c.chunks, "[DONE]") {
				ev := sse.NewEvent("", []byte(d))
				p.Push(&ev, now)
			}
			if got := string(p.Stats().Usage); !strings.Contains(got, c.want) {
				t.Errorf("%s, %s: usage %s, want %s", c.name, m, got, c.want)
			}
		}
	}
}

// A Chat stream's tool call arguments are counted for the usage estimate
// (RunesOut counts text only).
func TestChatToolRunes(t *testing.T) {
	for _, m := range modes {
		p := NewPacer(Config{Mode: m})
		now := time.Now()
		for _, d := range []string{
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"value\""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":\"Sparkle Day\"}"}}]}}]}`,
			"[DONE]",
		} {
			ev := sse.NewEvent("", []byte(d))
			p.Push(&ev, now)
		}
		if got := p.Stats().ToolRunes; got != len(`{"value":"Sparkle Day"}`) {
			t.Errorf("%s: %d tool runes", m, got)
		}
	}
}
