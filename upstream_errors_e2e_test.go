package llmrelay_test

// Errors keep their meaning (issue 25): an upstream's own error, in a
// Responses stream's response.failed, in OpenAI's 429 insufficient_quota
// or in an Anthropic 200 whose body is an error, fails over as what it is,
// and reaches the client as that error when no target is left.

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// The recorded response.failed's error (openai-response-failed.sse).
const (
	failedCode    = "rate_limit_exceeded"
	failedMessage = "Request too large for gpt-4o-mini in organization on tokens per min (TPM): Limit 30000, Requested 35364."
)

// A Responses stream that fails before any output: the failover log keeps
// the upstream's code and message, and when it is the last target the
// client gets them (429 for rate_limit_exceeded), not "unknown".
func TestResponsesFailedKeepsCodeAndMessage(t *testing.T) {
	failed := streamUpstream(t, usageRecording(t, "openai-response-failed.sse"), "")
	good := streamUpstream(t, responsesStream("resp_good", "hello"), "")
	logFile := startRelay(t, `llm_relay {
		upstream failed `+failed.v1()+`
		upstream good `+good.v1()+`
		model m {
			to failed
			to good
		}
		model solo {
			to failed
		}
	}`)
	ids, text, err := streamResponses(t, "m")
	if err != nil || text != "hello" || strings.Join(ids, ",") != "resp_good,resp_good" {
		t.Fatalf("failover: responses %v, text %q, error %v", ids, text, err)
	}
	line := relayedLog(t, logFile, 1)
	failures, _ := line["failures"].([]any)
	if len(failures) != 1 || !strings.Contains(failures[0].(string), failedCode) || !strings.Contains(failures[0].(string), failedMessage) {
		t.Fatalf("the failover log lost the upstream's code or message: %v", failures)
	}

	_, _, err = streamResponses(t, "solo")
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusTooManyRequests || oe.Code != failedCode || !strings.Contains(oe.Message, failedMessage) {
		t.Fatalf("last target: openai-go got %v; want 429 %s with the upstream's message", err, failedCode)
	}
	raw := readAll(t, postPath(t, "/v1/responses", `{"model":"solo","stream":true,"input":"hi"}`))
	if e := decodeErr(t, raw); e.Error.Code != failedCode || e.Error.Message != failedMessage {
		t.Fatalf("last target: %s", raw)
	}
}

// OpenAI's 429 insufficient_quota is a billing problem, not a rate limit:
// the relay moves on to the next target at once and never revisits that
// one in the request (no Retry-After wait, no backoff); when it is the
// last, the client gets the upstream's code and message, 429 as OpenAI
// sends it, without Retry-After and with x-should-retry: false, so the
// official SDKs do not retry it either.
func TestInsufficientQuotaMovesOnAndIsPassedOn(t *testing.T) {
	const quotaMsg = "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
	quota := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "2")
		answerJSON(w, http.StatusTooManyRequests, `{"error":{"message":"`+quotaMsg+`","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	})
	flaky := newFakeUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			answerJSON(w, http.StatusBadGateway, `{}`)
			return
		}
		answerJSON(w, http.StatusOK, okCompletion)
	})
	logFile := startRelay(t, `llm_relay {
		upstream quota `+quota.v1()+`
		upstream flaky `+flaky.v1()+`
		model m {
			to quota
			to flaky
		}
		model solo {
			to quota
		}
		failover {
			attempts 4
			backoff 1ms 5ms
		}
	}`)
	// Slots: quota (insufficient_quota), flaky (502), quota (not again),
	// flaky (200).
	resp := post(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if n := len(quota.requests()); n != 1 {
		t.Fatalf("the target out of quota was tried %d times in one request", n)
	}
	line := relayedLog(t, logFile, 1)
	if f := strings.Join(anyStrings(line["failures"]), "; "); !strings.Contains(f, "insufficient_quota") {
		t.Errorf("failures: %s", f)
	}

	// The last target: its error, 429 without Retry-After.
	resp = post(t, `{"model":"solo","messages":[{"role":"user","content":"hi"}]}`)
	body := readAll(t, resp)
	e := decodeErr(t, body)
	if resp.StatusCode != http.StatusTooManyRequests || e.Error.Code != "insufficient_quota" || e.Error.Type != "insufficient_quota" || e.Error.Message != quotaMsg {
		t.Fatalf("last target: %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get("Retry-After") != "" || resp.Header.Get("Retry-After-Ms") != "" || resp.Header.Get("X-Should-Retry") != "false" {
		t.Fatalf("last target: Retry-After %q, Retry-After-Ms %q, X-Should-Retry %q", resp.Header.Get("Retry-After"),
			resp.Header.Get("Retry-After-Ms"), resp.Header.Get("X-Should-Retry"))
	}
	if n := len(quota.requests()); n != 2 {
		t.Fatalf("attempts 4 on a one-target chain tried it %d times in all (want 1 more)", n-1)
	}

	// The official SDKs, with their default retries, do not retry it.
	before := len(quota.requests())
	client := openai.NewClient(option.WithBaseURL(relayBase+"/v1"), option.WithAPIKey("sk-none"), option.WithMaxRetries(2))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "solo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusTooManyRequests || oe.Code != "insufficient_quota" {
		t.Fatalf("openai-go: %v", err)
	}
	ac := anthropic.NewClient(aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(relayBase), aoption.WithAPIKey("sk-none"), aoption.WithMaxRetries(2))
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     "solo",
		MaxTokens: 16,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusTooManyRequests || !strings.Contains(ae.Error(), quotaMsg) {
		t.Fatalf("anthropic-sdk-go: %v", err)
	}
	if n := len(quota.requests()) - before; n != 2 {
		t.Fatalf("the two SDKs sent %d requests upstream, want one each (no retry)", n)
	}
}

// anyStrings is a decoded JSON array of strings.
func anyStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// An Anthropic 200 whose body is an error is that error (overloaded_error:
// 529): failed over like a 529, and when it is the last target the client
// gets 529 and the upstream's body, never a 200 success.
func TestAnthropic200ErrorBodyIsAnError(t *testing.T) {
	const overloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	bad := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, http.StatusOK, overloaded)
	})
	good := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, http.StatusOK, `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}`)
	})
	logFile := startRelay(t, `llm_relay {
		upstream bad `+bad.v1()+` {
			api anthropic
		}
		upstream good `+good.v1()+` {
			api anthropic
		}
		model claude {
			to bad
			to good
		}
		model solo {
			to bad
		}
	}`)
	const msg = `{"model":"%s","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	resp := postPath(t, "/v1/messages", strings.Replace(msg, "%s", "claude", 1))
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"text":"hello"`) {
		t.Fatalf("failover: %d %s", resp.StatusCode, body)
	}
	if f := strings.Join(anyStrings(relayedLog(t, logFile, 1)["failures"]), "; "); !strings.Contains(f, "529") || !strings.Contains(f, "overloaded_error") {
		t.Errorf("failures: %s", f)
	}

	resp = postPath(t, "/v1/messages", strings.Replace(msg, "%s", "solo", 1))
	if body := readAll(t, resp); resp.StatusCode != 529 || body != overloaded {
		t.Fatalf("last target, Messages client: %d %s; want 529 and the upstream's body", resp.StatusCode, body)
	}
	ac := anthropicClient(relayBase, "sk-none")
	_, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model:     "solo",
		MaxTokens: 16,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 529 {
		t.Fatalf("anthropic-sdk-go: %v", err)
	}
	// A Chat client of the same upstream: the same status, in its shape.
	resp = post(t, `{"model":"solo","messages":[{"role":"user","content":"hi"}]}`)
	body := readAll(t, resp)
	if e := decodeErr(t, body); resp.StatusCode != 529 || e.Error.Code != "overloaded_error" || e.Error.Message != "Overloaded" {
		t.Fatalf("last target, Chat client: %d %s", resp.StatusCode, body)
	}
}
