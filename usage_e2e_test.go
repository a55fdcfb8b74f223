package llmrelay_test

// Reasoning budgets, adaptive effort, usage and cost, key budgets and
// metrics, through a real Caddy in front of simulators on :9083.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

// usageSims: /big/ reasons at length (60 reasoning deltas), /small/
// briefly (3); both answer with 10 content deltas, back to back.
const usageSims = `http://127.0.0.1:9083 {
	handle /big/* {
		llm_simulator {
			seed 3
			reasoning_tokens 60
			content_tokens 10
			pattern steady 0
		}
	}
	handle /small/* {
		llm_simulator {
			seed 4
			reasoning_tokens 3
			content_tokens 10
			pattern steady 0
		}
	}
}`

func simTexts(seed int64, r, c int) (string, string) {
	rs, cs := sim.Texts(sim.Config{Seed: seed, ReasoningTokens: &r, ContentTokens: &c})
	return strings.Join(rs, ""), strings.Join(cs, "")
}

// streamParts reassembles a stream's reasoning and content, and says
// whether it ended with [DONE] and which error code it carried.
type streamParts struct {
	reasoning, content string
	done               bool
	errCode            string
	usageChunks        int
}

func parseStream(t *testing.T, body string) streamParts {
	t.Helper()
	var p streamParts
	for _, d := range sseDatas(body) {
		if d == "[DONE]" {
			p.done = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content          *string `json:"content"`
					ReasoningContent *string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *json.RawMessage `json:"usage"`
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("event is not JSON: %q", d)
		}
		if c.Error != nil {
			p.errCode = c.Error.Code
		}
		if len(c.Choices) == 0 && c.Usage != nil && string(*c.Usage) != "null" {
			p.usageChunks++
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				p.content += *ch.Delta.Content
			}
			if ch.Delta.ReasoningContent != nil {
				p.reasoning += *ch.Delta.ReasoningContent
			}
		}
	}
	return p
}

const streamBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`

func TestReasoningBudgetActions(t *testing.T) {
	bigR, bigC := simTexts(3, 60, 10)
	smallR, smallC := simTexts(4, 3, 10)
	for _, action := range []string{"truncate", "failover", "error"} {
		t.Run(action, func(t *testing.T) {
			logFile := startRelay(t, `llm_relay {
				key sk-test-client
				upstream big http://127.0.0.1:9083/big/v1
				upstream small http://127.0.0.1:9083/small/v1
				model m {
					to big
					to small
					reasoning_budget 10 `+action+`
				}
			}`, usageSims)
			resp := post(t, streamBody, "Authorization", "Bearer sk-test-client")
			body := readAll(t, resp)
			p := parseStream(t, body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			switch action {
			case "truncate":
				if !p.done || p.content != bigC || p.reasoning == "" || !strings.HasPrefix(bigR, p.reasoning) || len(p.reasoning) >= len(bigR) {
					t.Fatalf("truncate: done %v, reasoning %d of %d bytes (prefix %v), content exact %v",
						p.done, len(p.reasoning), len(bigR), strings.HasPrefix(bigR, p.reasoning), p.content == bigC)
				}
			case "failover":
				// The big model's reasoning up to the budget, then the
				// small model's whole answer, on one valid stream.
				if !p.done || p.content != smallC || !strings.HasSuffix(p.reasoning, smallR) ||
					!strings.HasPrefix(bigR, strings.TrimSuffix(p.reasoning, smallR)) {
					t.Fatalf("failover: done %v, content %q (want %q), reasoning %q", p.done, p.content, smallC, p.reasoning)
				}
				waitFor(t, 5*time.Second, "the log line", func() bool {
					return strings.Contains(readLog(t, logFile), `"reasoning_budget_failovers":1`)
				})
				// The official SDK takes the joined stream as one answer.
				got := streamGo(t, "m")
				if strings.Join(got.content, "") != smallC || got.finish != "stop" {
					t.Fatalf("openai-go: content %q finish %q", strings.Join(got.content, ""), got.finish)
				}
			case "error":
				if p.done || p.errCode != "reasoning_budget_exceeded" || p.content != "" {
					t.Fatalf("error: done %v, code %q, content %q", p.done, p.errCode, p.content)
				}
			}
		})
	}
}

func TestReasoningBudgetHeader(t *testing.T) {
	bigR, _ := simTexts(3, 60, 10)
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	startRelay(t, `llm_relay {
		upstream big http://127.0.0.1:9083/big/v1
		upstream fake `+up.v1()+`
		model m {
			to big
			reasoning_budget 1000
		}
		model f {
			to fake {
				set reasoning.max_tokens {llm_relay.reasoning_budget}
			}
			reasoning_budget 300
		}
	}`, usageSims)
	full := parseStream(t, readAll(t, post(t, streamBody)))
	if full.reasoning != bigR {
		t.Fatalf("a budget of 1000 cut the reasoning")
	}
	short := parseStream(t, readAll(t, post(t, streamBody, "X-Relay-Reasoning-Budget", "5")))
	if len(short.reasoning) >= len(bigR) || !short.done {
		t.Fatalf("X-Relay-Reasoning-Budget 5 did not cut the reasoning (%d of %d bytes)", len(short.reasoning), len(bigR))
	}
	// A client cannot raise the cap: 5000 > 300 stays 300 at the upstream.
	readAll(t, post(t, `{"model":"f","messages":[]}`, "X-Relay-Reasoning-Budget", "5000"))
	readAll(t, post(t, `{"model":"f","messages":[]}`, "X-Relay-Reasoning-Budget", "42"))
	got := up.requests()
	if len(got) != 2 {
		t.Fatalf("%d upstream requests", len(got))
	}
	for i, want := range []float64{300, 42} {
		r, _ := got[i].body["reasoning"].(map[string]any)
		if r["max_tokens"] != want {
			t.Errorf("request %d: reasoning.max_tokens = %v, want %v", i, r["max_tokens"], want)
		}
		if got[i].header.Get("X-Relay-Reasoning-Budget") != "" {
			t.Errorf("request %d: the budget header reached the upstream", i)
		}
	}
	resp := post(t, streamBody, "X-Relay-Reasoning-Budget", "lots")
	if e := decodeErr(t, readAll(t, resp)); resp.StatusCode != 400 || e.Error.Code != "invalid_reasoning_budget" {
		t.Fatalf("status %d code %s", resp.StatusCode, e.Error.Code)
	}
}

func TestAdaptiveEffort(t *testing.T) {
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	startRelay(t, `llm_relay {
		upstream u `+up.v1()+`
		model m {
			to u
		}
		adaptive_effort {
			below 100 high
			below 2000 medium
			else low
		}
	}`)
	msg := func(words int, extra string) string {
		return `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("word ", words) + `"}]` + extra + `}`
	}
	cases := []struct {
		body, want string
	}{
		{msg(10, ""), "high"},
		{msg(800, ""), "medium"},
		{msg(5000, ""), "low"},
		{msg(5000, `,"reasoning_effort":"high"`), "high"}, // the client's own choice is kept
	}
	for _, c := range cases {
		readAll(t, post(t, c.body))
	}
	for i, r := range up.requests() {
		if got := r.body["reasoning_effort"]; got != cases[i].want {
			t.Errorf("request %d: reasoning_effort %v, want %s", i, got, cases[i].want)
		}
	}
}

func TestUsageChunkKeptOrDropped(t *testing.T) {
	startRelay(t, `llm_relay {
		upstream small http://127.0.0.1:9083/small/v1
		model m {
			to small
		}
	}`, usageSims)
	plain := parseStream(t, readAll(t, post(t, streamBody)))
	asked := parseStream(t, readAll(t, post(t, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`)))
	if plain.usageChunks != 0 || !plain.done {
		t.Errorf("a client that did not ask got %d usage chunks", plain.usageChunks)
	}
	if asked.usageChunks != 1 || !asked.done {
		t.Errorf("a client that asked got %d usage chunks", asked.usageChunks)
	}
}

func TestCostAndKeyBudget(t *testing.T) {
	// The small simulator answers 13 completion tokens (3 reasoning) to
	// "hi" (1 prompt token by its estimate: ceil(2/4)).
	logFile := startRelay(t, `llm_relay {
		key sk-cheap cheap budget 0.00002 per day
		key sk-rich rich
		upstream small http://127.0.0.1:9083/small/v1
		model m {
			to small sim-small
		}
		price sim-small {
			input 1000
			output 2000
		}
	}`, usageSims)
	resp := post(t, streamBody, "Authorization", "Bearer sk-cheap")
	readAll(t, resp)
	want := (1*1000.0 + 13*2000.0) / 1e6 // $0.027
	waitFor(t, 5*time.Second, "the cost log line", func() bool { return strings.Contains(readLog(t, logFile), `"cost":`) })
	log := readLog(t, logFile)
	mustContain(t, log, fmt.Sprintf(`"cost":"$%.3f"`, want), `"prompt_tokens":1`, `"completion_tokens":13`, `"reasoning_tokens":3`)
	// One request took the key from $0 to far past its budget: all three
	// alerts, once each.
	for _, pct := range []string{"50", "80", "100"} {
		if n := strings.Count(log, `"threshold_percent":`+pct+`,`); n != 1 {
			t.Errorf("%s%% alert logged %d times", pct, n)
		}
	}
	resp = post(t, streamBody, "Authorization", "Bearer sk-cheap")
	body := readAll(t, resp)
	if e := decodeErr(t, body); resp.StatusCode != 429 || e.Error.Code != "budget_exceeded" {
		t.Fatalf("over budget: status %d %s", resp.StatusCode, body)
	}
	// Retry-After says when the daily budget renews: the next UTC midnight.
	now := time.Now().UTC()
	untilMidnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Sub(now)
	var ra int
	if _, err := fmt.Sscan(resp.Header.Get("Retry-After"), &ra); err != nil ||
		time.Duration(ra)*time.Second < untilMidnight-5*time.Second || time.Duration(ra)*time.Second > untilMidnight+5*time.Second {
		t.Errorf("Retry-After %q, want about %.0f s (next UTC midnight)", resp.Header.Get("Retry-After"), untilMidnight.Seconds())
	}
	if resp := post(t, streamBody, "Authorization", "Bearer sk-rich"); resp.StatusCode != 200 {
		t.Fatalf("a key without a budget got %d", resp.StatusCode)
	} else {
		readAll(t, resp)
	}
	if n := strings.Count(readLog(t, logFile), `"threshold_percent":100,`); n != 1 {
		t.Errorf("100%% alert logged %d times after a rejected request", n)
	}
	// The status view and the gauge show the spend.
	st := scrapeStatus(t)
	mustContain(t, st, `"key": "cheap"`, `"blocked": true`, `"budget": "$0.00002 daily"`)
	mustContain(t, scrapeMetrics(t), `llm_relay_budget_remaining_usd{key="cheap"} 0`)
}

func scrapeMetrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://localhost:2999/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func metricValue(t *testing.T, metrics, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

func TestMetricsAcrossReload(t *testing.T) {
	cfg := func(extra string) string {
		return `llm_relay {
			key sk-metrics metrics-key
			upstream small http://127.0.0.1:9083/small/v1
			model metered {
				to small
			}
			` + extra + `
		}`
	}
	startRelay(t, cfg(""), usageSims)
	before := metricValue(t, scrapeMetrics(t), `llm_relay_requests_total{alias="metered",outcome="ok",upstream="small"}`)
	for range 3 {
		readAll(t, post(t, strings.Replace(streamBody, `"m"`, `"metered"`, 1), "Authorization", "Bearer sk-metrics"))
	}
	m := scrapeMetrics(t)
	if got := metricValue(t, m, `llm_relay_requests_total{alias="metered",outcome="ok",upstream="small"}`); got != before+3 {
		t.Fatalf("requests_total = %v, want %v", got, before+3)
	}
	mustContain(t, m, `llm_relay_tokens_total{alias="metered",key="metrics-key",kind="completion"}`,
		`llm_relay_time_to_first_token_seconds_bucket{upstream="small"`, `llm_relay_stream_output_gap_p99_seconds_bucket{mode="off"`,
		`llm_relay_target_healthy{model="*",upstream="small"} 1`)
	if strings.Contains(m, "sk-metrics") {
		t.Fatal("a key token appears in /metrics")
	}
	// A reload (another model added) keeps the counts and the series.
	startRelay(t, cfg("model other {\n\t\t\t\tto small\n\t\t\t}"), usageSims)
	readAll(t, post(t, strings.Replace(streamBody, `"m"`, `"metered"`, 1), "Authorization", "Bearer sk-metrics"))
	if got := metricValue(t, scrapeMetrics(t), `llm_relay_requests_total{alias="metered",outcome="ok",upstream="small"}`); got != before+4 {
		t.Fatalf("after reload requests_total = %v, want %v", got, before+4)
	}
}

// Non-streaming: the truncating budget cuts the reasoning of the answer
// the relay assembles (see reasoningtrace_e2e_test.go), but the upstream
// reasoned on; the overrun is reported from its usage.
func TestReasoningBudgetOverrunReported(t *testing.T) {
	logFile := startRelay(t, `llm_relay {
		upstream big http://127.0.0.1:9083/big/v1
		model m {
			to big
			reasoning_budget 10
		}
	}`, usageSims)
	resp := post(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	waitFor(t, 5*time.Second, "the overrun warning", func() bool {
		return strings.Contains(readLog(t, logFile), `"msg":"reasoning budget overrun"`)
	})
	mustContain(t, readLog(t, logFile), `"reasoning_tokens":60`, `"budget":10`)
}

func scrapeStatus(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://localhost:2999/llm_relay/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
