package llmrelay_test

// Failover across dialects inside one request, streaming, once per client
// dialect: the first target speaks the client's dialect and answers 503,
// the second speaks the other dialect and answers (translated), and the
// client's official SDK sees one clean answer. The relay's log and metrics
// record the failover.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// crossRelay: xd-chat is an OpenAI target that fails, then the simulator
// as an Anthropic target; xd-messages is an Anthropic target that fails,
// then the simulator as a Chat target; xd-overloaded is the simulator as
// an Anthropic target answering 529 overloaded_error, then as a Chat one.
func crossRelay(openaiDown, anthropicDown *fakeUpstream) string {
	return `llm_relay {
		key ` + sdkKey + `
		upstream openai-down ` + openaiDown.v1() + `
		upstream anthropic-down ` + anthropicDown.v1() + ` {
			api anthropic
		}
		upstream simanth ` + simV1 + ` {
			api anthropic
		}
		upstream simchat ` + simV1 + ` {
			api chat
		}
		upstream busyanth http://127.0.0.1:9084/busy/v1 {
			api anthropic
		}
		model xd-overloaded {
			to busyanth claude-x
			to simchat sim-reasoner
		}
		model xd-chat {
			to openai-down gpt-x
			to simanth sim-reasoner
		}
		model xd-messages {
			to anthropic-down claude-x
			to simchat sim-reasoner
		}
		failover {
			backoff 1ms 1ms
		}
	}`
}

// failoverCounts reads the failover counter of alias and the failed
// attempts of upstream (metrics are process-wide: compare before/after).
func failoverCounts(t *testing.T, alias, upstream string) (failovers, failed float64) {
	t.Helper()
	m := scrapeMetrics(t)
	return metricValue(t, m, `llm_relay_failovers_total{alias="`+alias+`"}`),
		metricValue(t, m, `llm_relay_attempts_total{result="failed",upstream="`+upstream+`"}`)
}

// checkFailoverLogged fails unless the relay logged the failed attempt on
// down and the request answered by up after two attempts.
func checkFailoverLogged(t *testing.T, logFile, alias, down, up string) {
	t.Helper()
	waitFor(t, 5*time.Second, "the relayed log line of "+alias, func() bool {
		for _, line := range strings.Split(readLog(t, logFile), "\n") {
			if strings.Contains(line, `"msg":"relayed"`) && strings.Contains(line, `"alias":"`+alias+`"`) {
				return true
			}
		}
		return false
	})
	var attempt, relayed string
	for _, line := range strings.Split(readLog(t, logFile), "\n") {
		if !strings.Contains(line, `"alias":"`+alias+`"`) {
			continue
		}
		switch {
		case strings.Contains(line, `"msg":"upstream attempt"`) && strings.Contains(line, `"upstream":"`+down+`"`):
			attempt = line
		case strings.Contains(line, `"msg":"relayed"`):
			relayed = line
		}
	}
	if attempt == "" || strings.Contains(attempt, `"outcome":"committed"`) {
		t.Errorf("no failed attempt on %s logged; attempt line: %q", down, attempt)
	}
	if !strings.Contains(relayed, `"upstream":"`+up+`"`) || !strings.Contains(relayed, `"attempts":2`) || !strings.Contains(relayed, `"status":200`) {
		t.Errorf("relayed line %q; want upstream %s after 2 attempts, status 200", relayed, up)
	}
}

// down503 answers every request 503 in its dialect's error shape.
func down503(anthropicShape bool) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		if anthropicShape {
			answerJSON(w, 503, `{"type":"error","error":{"type":"api_error","message":"down for maintenance"}}`)
			return
		}
		answerJSON(w, 503, `{"error":{"message":"down for maintenance","type":"server_error","code":"unavailable"}}`)
	}
}

// TestCrossDialectFailoverChatClient: openai-go streams from xd-chat; the
// OpenAI target's 503 is invisible and the answer is the Anthropic
// simulator's, translated to Chat Completions chunks.
func TestCrossDialectFailoverChatClient(t *testing.T) {
	openaiDown := newFakeUpstream(t, down503(false))
	anthropicDown := newFakeUpstream(t, down503(true))
	logFile := startRelay(t, crossRelay(openaiDown, anthropicDown), clientsSimSite)
	want := send(t, "direct Messages request", directAnthropic(), false, userParams("sim-reasoner")).text
	failoversBefore, failedBefore := failoverCounts(t, "xd-chat", "openai-down")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := chatParams("xd-chat")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	client := openaiClient(sdkKey)
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	ids := map[string]bool{}
	for stream.Next() {
		ch := stream.Current()
		ids[ch.ID] = true
		acc.AddChunk(ch)
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	_ = stream.Close()
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != want || acc.Choices[0].FinishReason != "stop" {
		t.Fatalf("streamed answer %+v; want the Anthropic simulator's %q, stop", acc.Choices, want)
	}
	if len(ids) != 1 || acc.Usage.CompletionTokens <= 0 {
		t.Errorf("chunk ids %v (one stream has one id), usage %+v", ids, acc.Usage)
	}

	seen := openaiDown.requests()
	if len(seen) != 1 || seen[0].path != "/v1/chat/completions" || seen[0].body["model"] != "gpt-x" || seen[0].body["stream"] != true {
		t.Fatalf("the OpenAI target saw %+v; want one streaming chat request for gpt-x", seen)
	}
	if len(anthropicDown.requests()) != 0 {
		t.Error("the other alias's upstream was called")
	}
	checkFailoverLogged(t, logFile, "xd-chat", "openai-down", "simanth")
	failovers, failed := failoverCounts(t, "xd-chat", "openai-down")
	if failovers != failoversBefore+1 || failed != failedBefore+1 {
		t.Errorf("metrics: failovers %v→%v, failed attempts %v→%v; want one more of each", failoversBefore, failovers, failedBefore, failed)
	}
}

// TestCrossDialectFailoverMessagesClient: anthropic-sdk-go streams from
// xd-messages; the Anthropic target's 503 is invisible and the answer is
// the Chat simulator's, translated to Messages events.
func TestCrossDialectFailoverMessagesClient(t *testing.T) {
	openaiDown := newFakeUpstream(t, down503(false))
	anthropicDown := newFakeUpstream(t, down503(true))
	logFile := startRelay(t, crossRelay(openaiDown, anthropicDown), clientsSimSite)
	_, want := directChat(t, simV1)
	failoversBefore, failedBefore := failoverCounts(t, "xd-messages", "anthropic-down")

	got := send(t, "NewStreaming", anthropicClient(relayBase, sdkKey), true, userParams("xd-messages"))
	if got.text != want || got.stop != "end_turn" {
		t.Fatalf("streamed answer: text %q stop %q; want the Chat simulator's %q, end_turn", got.text, got.stop, want)
	}

	seen := anthropicDown.requests()
	if len(seen) != 1 || seen[0].path != "/v1/messages" || seen[0].body["model"] != "claude-x" || seen[0].body["stream"] != true {
		t.Fatalf("the Anthropic target saw %+v; want one streaming Messages request for claude-x", seen)
	}
	if k := seen[0].header.Get("X-Api-Key"); k == sdkKey {
		t.Error("the client's relay key reached the upstream")
	}
	checkFailoverLogged(t, logFile, "xd-messages", "anthropic-down", "simchat")
	failovers, failed := failoverCounts(t, "xd-messages", "anthropic-down")
	if failovers != failoversBefore+1 || failed != failedBefore+1 {
		t.Errorf("metrics: failovers %v→%v, failed attempts %v→%v; want one more of each", failoversBefore, failovers, failedBefore, failed)
	}

	// Anthropic's own failure, 529 overloaded_error (from the simulator),
	// fails over the same way.
	got = send(t, "NewStreaming after an overloaded target", anthropicClient(relayBase, sdkKey), true, userParams("xd-overloaded"))
	if got.text != want || got.stop != "end_turn" {
		t.Fatalf("after an overloaded target: text %q stop %q; want the Chat simulator's %q", got.text, got.stop, want)
	}
	checkFailoverLogged(t, logFile, "xd-overloaded", "busyanth", "simchat")
}
