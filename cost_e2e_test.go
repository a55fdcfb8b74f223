package llmrelay_test

// Cost as operators read it (cost.go), through a real Caddy in front of a
// simulator on :9094: X-Relay-Cost-USD on whole answers, the cost comment
// at the end of streams (and the official Node SDKs reading past it), the
// built-in price list, overridden by a price block and switched off, the
// cost metric by alias and model, each target's price on the status view,
// and the reasoning budget per key, on one relay and on a fleet.

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// costSim answers 3 reasoning and 10 content tokens, with usage.
const costSim = `http://127.0.0.1:9094 {
	handle /sim/* {
		llm_simulator {
			seed 7
			reasoning_tokens 3
			content_tokens 10
			pattern steady 0
		}
	}
}`

// costRelay: cost-b sends a dated snapshot of gpt-5 (the built-in list's
// $1.25 / $10), cost-o gpt-4.1 (built in too, but a price block says
// $1000 / $2000), cost-n a model nothing prices.
func costRelay(extra string) string {
	return `llm_relay {
		key sk-cost cost
		key sk-reason reason {
			reasoning_budget 5 per day
		}
		upstream sim http://127.0.0.1:9094/sim/v1
		model cost-b {
			to sim gpt-5-2025-08-07
		}
		model cost-o {
			to sim gpt-4.1
		}
		model cost-n {
			to sim my-local-model
		}
		price gpt-4.1 {
			input 1000
			output 2000
		}
		` + extra + `
	}`
}

// wantCost is tokens × prices (USD per MTok), written as the relay writes
// costs: to the nano-dollar, no exponent, trailing zeros dropped.
func wantCost(prompt, completion int, in, out float64) string {
	v := (float64(prompt)*in + float64(completion)*out) / 1e6
	return strconv.FormatFloat(math.Round(v*1e9)/1e9, 'f', -1, 64)
}

// chatUsage is a non-stream answer's usage.
func chatUsage(t *testing.T, body string) (prompt, completion int) {
	t.Helper()
	var a struct {
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			Details          struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &a); err != nil || a.Usage.CompletionTokens == 0 {
		t.Fatalf("no usage in the answer (%v): %s", err, body)
	}
	if a.Usage.Details.Cached != 0 {
		t.Fatalf("the simulator reported cached tokens: %s", body)
	}
	return a.Usage.PromptTokens, a.Usage.CompletionTokens
}

func costChat(model string, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"what does it cost?"}]}`, model, stream)
}

func TestCostHeaderBuiltinPricesOverrideAndOff(t *testing.T) {
	startRelay(t, costRelay(""), costSim)
	series := `llm_relay_model_cost_usd_total{alias="cost-b",model="gpt-5-2025-08-07",upstream="sim"}`
	before := metricValue(t, scrapeMetrics(t), series)

	// The built-in price, by the dated-snapshot rule.
	resp := post(t, costChat("cost-b", false), "Authorization", "Bearer sk-cost")
	body := readAll(t, resp)
	p, c := chatUsage(t, body)
	if got, want := resp.Header.Get("X-Relay-Cost-USD"), wantCost(p, c, 1.25, 10); got != want || want == "0" {
		t.Errorf("cost-b (gpt-5 built in): X-Relay-Cost-USD %q, want %q (%d in, %d out)", got, want, p, c)
	}
	if resp.Header.Get("X-Relay-Cost-Estimated") != "" {
		t.Errorf("an answer with usage is marked estimated")
	}
	// The metric counts it under the alias and the configured model.
	after := metricValue(t, scrapeMetrics(t), series)
	if w, _ := strconv.ParseFloat(wantCost(p, c, 1.25, 10), 64); math.Abs(after-before-w) > 1e-12 {
		t.Errorf("%s went from %v to %v, want +%v", series, before, after, w)
	}

	// A price block wins over the built-in price.
	resp = post(t, costChat("cost-o", false), "Authorization", "Bearer sk-cost")
	body = readAll(t, resp)
	p, c = chatUsage(t, body)
	if got, want := resp.Header.Get("X-Relay-Cost-USD"), wantCost(p, c, 1000, 2000); got != want {
		t.Errorf("cost-o (price block over the built-in gpt-4.1): X-Relay-Cost-USD %q, want %q", got, want)
	}

	// No price: no header (never a silent $0).
	resp = post(t, costChat("cost-n", false), "Authorization", "Bearer sk-cost")
	readAll(t, resp)
	if v, ok := resp.Header["X-Relay-Cost-Usd"]; ok {
		t.Errorf("cost-n (unpriced): X-Relay-Cost-USD %q, want none", v)
	}

	// The status view says which price applies to each target, and whence.
	var st struct {
		Chains []struct {
			Alias   string `json:"alias"`
			Targets []struct {
				Price *struct {
					From, Match, Source, Taken string
					Input, Output              float64
				} `json:"price"`
			} `json:"targets"`
		} `json:"chains"`
	}
	if err := json.Unmarshal([]byte(scrapeStatus(t)), &st); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ch := range st.Chains {
		if len(ch.Targets) == 1 && ch.Targets[0].Price != nil {
			pr := ch.Targets[0].Price
			got[ch.Alias] = fmt.Sprintf("%s %s %v/%v %v %s", pr.From, pr.Match, pr.Input, pr.Output, strings.HasPrefix(pr.Source, "https://"), pr.Taken)
		}
	}
	for alias, want := range map[string]string{
		"cost-b": "builtin gpt-5 1.25/10 true 2026-12-07",
		"cost-o": "config gpt-4.1 1000/2000 false ",
		"cost-n": "none  0/0 false ",
	} {
		if got[alias] != want {
			t.Errorf("status price of %s: %q, want %q", alias, got[alias], want)
		}
	}

	// Switched off, the built-in list prices nothing; price blocks still do.
	startRelay(t, costRelay("builtin_prices off"), costSim)
	resp = post(t, costChat("cost-b", false), "Authorization", "Bearer sk-cost")
	readAll(t, resp)
	if v, ok := resp.Header["X-Relay-Cost-Usd"]; ok {
		t.Errorf("cost-b with builtin_prices off: X-Relay-Cost-USD %q, want none", v)
	}
	resp = post(t, costChat("cost-o", false), "Authorization", "Bearer sk-cost")
	body = readAll(t, resp)
	p, c = chatUsage(t, body)
	if got, want := resp.Header.Get("X-Relay-Cost-USD"), wantCost(p, c, 1000, 2000); got != want {
		t.Errorf("cost-o with builtin_prices off: X-Relay-Cost-USD %q, want %q", got, want)
	}
}

// costComment is the comment a priced stream ends with.
var costComment = regexp.MustCompile(`\n: relay-cost-usd=([0-9.]+)\n\n$`)

func TestCostCommentEndsStreams(t *testing.T) {
	logFile := startRelay(t, costRelay(""), costSim)
	n := 0
	for _, tc := range []struct{ dialect, path, body, end string }{
		{"chat", "/v1/chat/completions", costChat("cost-b", true), "data: [DONE]\n\n"},
		{"messages", "/v1/messages", `{"model":"cost-b","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"what does it cost?"}]}`,
			"event: message_stop\n"},
		{"responses", "/v1/responses", `{"model":"cost-b","stream":true,"input":"what does it cost?"}`, "event: response.completed\n"},
	} {
		t.Run(tc.dialect, func(t *testing.T) {
			body := readAll(t, postPath(t, tc.path, tc.body, "Authorization", "Bearer sk-cost"))
			n++
			m := costComment.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("the stream does not end with the cost comment:\n...%s", body[max(0, len(body)-400):])
			}
			if i, j := strings.LastIndex(body, tc.end), strings.LastIndex(body, ": relay-cost-usd="); i < 0 || i > j {
				t.Errorf("the comment is not after the stream's end (%q)", tc.end)
			}
			line := relayedLog(t, logFile, n)
			p, c := int(line["prompt_tokens"].(float64)), int(line["completion_tokens"].(float64))
			if want := wantCost(p, c, 1.25, 10); m[1] != want || line["cost_usd"] != want {
				t.Errorf("comment %s, log cost_usd %v; want %s (%d in, %d out at gpt-5's built-in price)", m[1], line["cost_usd"], want, p, c)
			}
		})
	}
	// Whole answers in the other dialects (translated from the Chat
	// simulator) carry the header, equal to the log's cost.
	for _, tc := range []struct{ path, body string }{
		{"/v1/messages", `{"model":"cost-b","max_tokens":256,"messages":[{"role":"user","content":"what does it cost?"}]}`},
		{"/v1/responses", `{"model":"cost-b","input":"what does it cost?"}`},
	} {
		resp := postPath(t, tc.path, tc.body, "Authorization", "Bearer sk-cost")
		readAll(t, resp)
		n++
		line := relayedLog(t, logFile, n)
		p, c := int(line["prompt_tokens"].(float64)), int(line["completion_tokens"].(float64))
		if got, want := resp.Header.Get("X-Relay-Cost-USD"), wantCost(p, c, 1.25, 10); got != want || line["cost_usd"] != want {
			t.Errorf("%s whole answer: X-Relay-Cost-USD %q, log cost_usd %v; want %s", tc.path, got, line["cost_usd"], want)
		}
	}
	// An unpriced stream ends as the upstream's did.
	body := readAll(t, post(t, costChat("cost-n", true), "Authorization", "Bearer sk-cost"))
	if strings.Contains(body, "relay-cost-usd") || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("an unpriced stream has a cost comment or lost its end:\n...%s", body[max(0, len(body)-200):])
	}
}

// TestCostCommentOfficialNodeSDKs: the openai client (Chat Completions
// and Responses streams) and @anthropic-ai/sdk (a Messages stream) read a
// priced stream, whose last bytes are the cost comment, to its end.
func TestCostCommentOfficialNodeSDKs(t *testing.T) {
	node := requireNode(t, "openai", "the openai Node SDK")
	requireNode(t, filepath.Join("@anthropic-ai", "sdk"), "the Anthropic Node SDK")
	startRelay(t, costRelay(""), costSim)
	// The same request raw: it does end with the comment.
	if body := readAll(t, post(t, costChat("cost-b", true), "Authorization", "Bearer sk-cost")); !costComment.MatchString(body) {
		t.Fatalf("no cost comment to read past:\n...%s", body[max(0, len(body)-300):])
	}
	if res, code := runNode(t, node, relayBase+"/v1", "sk-cost", "cost-b", "", "stream"); code != 0 || res.Error != nil || res.Content == "" {
		t.Errorf("openai chat stream: exit %d, %+v", code, res)
	}
	if res := runResponsesNode(t, node, relayBase+"/v1", "sk-cost", "cost-b", "stream"); res.Error != nil || res.Status != "completed" || res.Text == "" {
		t.Errorf("openai responses stream helper: %+v", res)
	}
	if res := runResponsesNode(t, node, relayBase+"/v1", "sk-cost", "cost-b", "events"); res.Error != nil || res.Events == 0 {
		t.Errorf("openai responses events: %+v", res)
	}
	if res, code := runMessagesNode(t, node, relayBase, "sk-cost", "cost-b", "stream"); code != 0 || res.Error != nil || res.Text == "" || res.StopReason == "" {
		t.Errorf("anthropic messages stream: exit %d, %+v", code, res)
	}
}

func TestKeyReasoningBudget(t *testing.T) {
	startRelay(t, costRelay(""), costSim)
	// 3 reasoning tokens a request: 5 is used up by the second.
	for i := range 2 {
		if resp := post(t, costChat("cost-n", false), "Authorization", "Bearer sk-reason"); resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d %s", i+1, resp.StatusCode, readAll(t, resp))
		} else {
			readAll(t, resp)
		}
	}
	resp := postPath(t, "/v1/messages", `{"model":"cost-n","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, "X-Api-Key", "sk-reason")
	body := readAll(t, resp)
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type, Message string
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != 429 || e.Type != "error" || !strings.Contains(e.Error.Message, "reasoning budget of 5 tokens") {
		t.Fatalf("over the reasoning budget, in Messages: status %d %s", resp.StatusCode, body)
	}
	resp = post(t, costChat("cost-n", false), "Authorization", "Bearer sk-reason")
	body = readAll(t, resp)
	if resp.StatusCode != 429 || decodeErr(t, body).Error.Code != "reasoning_budget_exceeded" {
		t.Fatalf("over the reasoning budget, in Chat: status %d %s", resp.StatusCode, body)
	}
	now := time.Now().UTC()
	untilMidnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Sub(now)
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || math.Abs(float64(ra)-untilMidnight.Seconds()) > 5 {
		t.Errorf("Retry-After %q, want about %.0f s (the next UTC midnight)", resp.Header.Get("Retry-After"), untilMidnight.Seconds())
	}
	// GET /v1/balance shows it, and is answered though the budget is spent.
	req, _ := http.NewRequest(http.MethodGet, relayBase+"/v1/balance", nil)
	req.Header.Set("Authorization", "Bearer sk-reason")
	bresp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var bal struct {
		ReasoningBudget *struct {
			Tokens, Used, Remaining int64
			Period                  string
		} `json:"reasoning_budget"`
	}
	if b := readAll(t, bresp); json.Unmarshal([]byte(b), &bal) != nil || bresp.StatusCode != 200 || bal.ReasoningBudget == nil ||
		bal.ReasoningBudget.Tokens != 5 || bal.ReasoningBudget.Used != 6 || bal.ReasoningBudget.Remaining != 0 || bal.ReasoningBudget.Period != "day" {
		t.Errorf("GET /v1/balance: %d %s", bresp.StatusCode, b)
	}
	// Another key is not held back.
	if resp := post(t, costChat("cost-n", false), "Authorization", "Bearer sk-cost"); resp.StatusCode != 200 {
		t.Errorf("a key without a reasoning budget got %d", resp.StatusCode)
	} else {
		readAll(t, resp)
	}
}

// TestFleetSharesReasoningBudget: two instances on one redis-server; the
// reasoning tokens one spends count against the key on the other.
func TestFleetSharesReasoningBudget(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	startRedis(t, sock)
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":400,"total_tokens":410,"completion_tokens_details":{"reasoning_tokens":300}}}`)
	})
	block := fmt.Sprintf(`llm_relay {
		key sk-r r {
			reasoning_budget 1000 per month
		}
		upstream ok %s
		model m {
			to ok
		}
		state redis unix:%s {
			sync_interval 250ms
		}
	}`, up.v1(), sock)
	a := startRelayProc(t, filepath.Join(dir, "a"), block)
	b := startRelayProc(t, filepath.Join(dir, "b"), block)
	// 300 a request: A's three use 900; B may take one more (1,200),
	// then the fleet is over 1,000.
	a.chatOK(t, "sk-r", "m", 3)
	time.Sleep(syncWait)
	b.chatOK(t, "sk-r", "m", 1)
	if st := b.chat(t, "sk-r", "m"); st != 429 {
		t.Errorf("B after the fleet's 1,200 reasoning tokens of 1,000: status %d, want 429", st)
	}
	time.Sleep(syncWait)
	if st := a.chat(t, "sk-r", "m"); st != 429 {
		t.Errorf("A after B's request: status %d, want 429", st)
	}
}
