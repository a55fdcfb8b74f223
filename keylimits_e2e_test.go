package llmrelay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestKeyRateLimits: a key's rpm and tpm answer 429 rate_limit_exceeded
// with Retry-After and OpenAI's x-ratelimit-* headers, which every answer
// for the key carries; a key without limits carries none.
func TestKeyRateLimits(t *testing.T) {
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":1,"total_tokens":101}}`)
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		key sk-rpm rpm-team {
			rpm 3
		}
		key sk-tpm tpm-team {
			tpm 40
		}
		key sk-free
		upstream a %s
		model chat {
			to a
		}
	}`, up.v1()))

	for i := range 3 {
		resp := post(t, chatBody, "Authorization", "Bearer sk-rpm")
		readAll(t, resp)
		h := resp.Header
		if resp.StatusCode != 200 || h.Get("X-Ratelimit-Limit-Requests") != "3" || h.Get("X-Ratelimit-Remaining-Requests") != strconv.Itoa(2-i) || h.Get("X-Ratelimit-Reset-Requests") == "" {
			t.Fatalf("request %d: %d, headers %v", i+1, resp.StatusCode, h)
		}
	}
	resp := post(t, chatBody, "Authorization", "Bearer sk-rpm")
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("4th request of rpm 3: %d %s", resp.StatusCode, body)
	}
	if e := decodeErr(t, body); e.Error.Code != "rate_limit_exceeded" || e.Error.Type != "rate_limit_error" {
		t.Errorf("4th request: %+v", e.Error)
	}
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	ms, _ := strconv.Atoi(resp.Header.Get("Retry-After-Ms"))
	if ra < 19 || ra > 20 || ms < 19000 || ms > 20000 || resp.Header.Get("X-Ratelimit-Remaining-Requests") != "0" {
		t.Errorf("4th request: Retry-After %q, Retry-After-Ms %q, headers %v; want about 20s (a request every 20s)",
			resp.Header.Get("Retry-After"), resp.Header.Get("Retry-After-Ms"), resp.Header)
	}
	if n := len(up.requests()); n != 3 {
		t.Errorf("upstream got %d requests, want 3", n)
	}

	// tpm: the prompt's estimate is taken when the request comes and set
	// right by the usage (101 tokens) when it ends. A request of more than
	// the whole minute passes on a full bucket; the next one waits out the
	// debt.
	big := `{"model":"chat","messages":[{"role":"user","content":"` + strings.Repeat("word ", 80) + `"}]}`
	resp = post(t, big, "Authorization", "Bearer sk-tpm")
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Limit-Tokens") != "40" {
		t.Fatalf("first tpm request: %d %v", resp.StatusCode, resp.Header)
	}
	resp = post(t, chatBody, "Authorization", "Bearer sk-tpm")
	body = readAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "40 tokens a minute") || resp.Header.Get("X-Ratelimit-Remaining-Tokens") != "0" {
		t.Errorf("tpm request in debt: %d %s %v", resp.StatusCode, body, resp.Header)
	}

	resp = post(t, chatBody, "Authorization", "Bearer sk-free")
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Limit-Requests") != "" {
		t.Errorf("a key without limits: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestKeyRateLimitDrivesSDKRetry: the headers make openai-go's own retry
// wait just long enough and succeed, unchanged. The wait (3s: rpm 20) is
// longer than the SDK's own backoff for its two retries, so without the
// headers it would give up.
func TestKeyRateLimitDrivesSDKRetry(t *testing.T) {
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		key sk-rpm rpm-team {
			rpm 20
		}
		upstream a %s
		model chat {
			to a
		}
	}`, up.v1()))
	// Empty the bucket: its whole minute, and whatever refilled while the
	// requests ran (on a loaded machine they may take a second or more),
	// until the relay refuses one and asks for a wait of 2s or more (a
	// refusal just before the next request's turn asks for less: that
	// turn is taken first). The SDK's call then starts on an empty
	// bucket, whatever the machine's speed.
	served, refused := 0, false
	var wait time.Duration
	var refusedAt time.Time
	for range 60 {
		resp := post(t, chatBody, "Authorization", "Bearer sk-rpm")
		readAll(t, resp)
		if resp.StatusCode == http.StatusTooManyRequests {
			refused = true
			ms, err := strconv.Atoi(resp.Header.Get("Retry-After-Ms"))
			if err != nil {
				t.Fatalf("a 429 without Retry-After-Ms: %v", resp.Header)
			}
			if wait = time.Duration(ms) * time.Millisecond; wait >= 2*time.Second {
				refusedAt = time.Now()
				break
			}
			time.Sleep(wait)
			continue
		}
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", served+1, resp.StatusCode)
		}
		served++
	}
	if served < 20 || refusedAt.IsZero() || !refused {
		t.Fatalf("%d requests served, refused %v, last wait %v: want 20 or a few more, then a 429 asking for 2s or more", served, refused, wait)
	}
	client := openai.NewClient(option.WithBaseURL(relayBase+"/v1/"), option.WithAPIKey("sk-rpm"), option.WithMaxRetries(2))
	start := time.Now()
	var raw *http.Response
	c, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}, option.WithResponseInto(&raw))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("openai-go did not get through the rate limit: %v", err)
	}
	if c.Choices[0].Message.Content != "hello" || raw.Header.Get("X-Ratelimit-Limit-Requests") != "20" {
		t.Errorf("answer %+v, headers %v", c, raw.Header)
	}
	// A request every 3s: the SDK waited what the headers asked for
	// (what was left of the last refusal's wait, not its own backoff,
	// not a minute), then succeeded on its first retry.
	if left := wait - start.Sub(refusedAt); took < left-250*time.Millisecond || took > 8*time.Second {
		t.Errorf("the SDK's call took %v; want about the %v left of the %v the headers asked for", took, left, wait)
	}
	if n := len(up.requests()); n != served+1 {
		t.Errorf("upstream got %d requests, want %d", n, served+1)
	}
}

// TestKeyBounds: allow_ip, not_before and expires are per token.
func TestKeyBounds(t *testing.T) {
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		key sk-elsewhere office {
			allow_ip 10.0.0.0/8 192.168.1.7
		}
		key sk-here office {
			allow_ip 127.0.0.0/8 ::1
		}
		key sk-old team {
			expires 2020-01-01
		}
		key sk-new team {
			not_before 2099-01-01T00:00:00Z
		}
		key sk-now team {
			not_before 2020-01-01
			expires 2099-01-01
		}
		upstream a %s
		model chat {
			to a
		}
	}`, up.v1()))
	for token, want := range map[string]struct {
		status int
		code   string
	}{
		"sk-elsewhere": {http.StatusForbidden, "ip_not_allowed"},
		"sk-here":      {200, ""},
		"sk-old":       {http.StatusUnauthorized, "key_expired"},
		"sk-new":       {http.StatusUnauthorized, "key_expired"},
		"sk-now":       {200, ""},
	} {
		resp := post(t, chatBody, "Authorization", "Bearer "+token)
		body := readAll(t, resp)
		if resp.StatusCode != want.status {
			t.Errorf("%s: %d %s, want %d", token, resp.StatusCode, body, want.status)
			continue
		}
		if want.code != "" {
			if e := decodeErr(t, body); e.Error.Code != want.code {
				t.Errorf("%s: %+v, want %s", token, e.Error, want.code)
			}
		}
	}
	if n := len(up.requests()); n != 2 {
		t.Errorf("upstream got %d requests, want 2", n)
	}
}

// TestKeyMaxConcurrentAndBalance: a key's max_concurrent counts a stream
// until it ends; GET /v1/balance shows the calling key's budget, spend and
// limits.
func TestKeyMaxConcurrentAndBalance(t *testing.T) {
	release := make(chan struct{})
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\n", chunk("held"))
			w.(http.Flusher).Flush()
			<-release // a stream in flight until the test lets it end
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		answerJSON(w, 200, okCompletion)
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		key sk-one solo {
			budget 5 per day
			rpm 100
			max_concurrent 1
		}
		upstream a %s
		model chat {
			to a
		}
		price chat {
			input 1
			output 1
		}
	}`, up.v1()))
	began := time.Now()
	streamDone := make(chan string)
	go func() {
		resp := post(t, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer sk-one")
		streamDone <- readAll(t, resp)
	}()
	waitFor(t, 5*time.Second, "the stream in flight", func() bool { return len(up.requests()) == 1 })
	resp := post(t, chatBody, "Authorization", "Bearer sk-one")
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "max_concurrent") || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("a second request while the stream runs: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	close(release)
	if s := <-streamDone; !strings.Contains(s, "[DONE]") {
		t.Fatalf("the held stream: %s", s)
	}
	resp = post(t, chatBody, "Authorization", "Bearer sk-one")
	if body := readAll(t, resp); resp.StatusCode != 200 {
		t.Errorf("after the stream ended: %d %s", resp.StatusCode, body)
	}

	req, _ := http.NewRequest("GET", relayBase+"/v1/balance", nil)
	req.Header.Set("Authorization", "Bearer sk-one")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Object, Key string
		Budget      *struct {
			USD          float64 `json:"usd"`
			Period       string  `json:"period"`
			SpentUSD     float64 `json:"spent_usd"`
			RemainingUSD float64 `json:"remaining_usd"`
		}
		Limits struct {
			RPM           *struct{ Limit, Remaining int64 }
			MaxConcurrent *struct{ Limit, Remaining int64 } `json:"max_concurrent"`
		}
	}
	raw := readAll(t, resp)
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	// Three requests took one each (the refused one too: rpm is taken
	// first; the balance itself takes none); the bucket refills one every
	// 0.6s, which a loaded machine may have given back by now.
	refilled := int64(time.Since(began) / (600 * time.Millisecond))
	if b.Object != "balance" || b.Key != "solo" || b.Budget == nil || b.Budget.USD != 5 || b.Budget.Period != "day" ||
		b.Budget.SpentUSD <= 0 || b.Budget.RemainingUSD >= 5 || b.Limits.RPM == nil || b.Limits.RPM.Limit != 100 ||
		b.Limits.RPM.Remaining < 97 || b.Limits.RPM.Remaining > 97+refilled ||
		b.Limits.MaxConcurrent == nil || b.Limits.MaxConcurrent.Remaining != 1 {
		t.Errorf("balance (rpm remaining should be 97, up to %d after %v): %s", 97+refilled, time.Since(began), raw)
	}
	if strings.Contains(raw, "sk-one") {
		t.Errorf("the balance shows the token: %s", raw)
	}
}

// TestBalanceAndModelsTakeNoLimit: GET /v1/balance and GET /v1/models are
// the relay's own answers: they take nothing from the key's rpm or
// max_concurrent and are answered when the rpm, or the budget, is spent,
// when the key most needs to read them.
func TestBalanceAndModelsTakeNoLimit(t *testing.T) {
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		key sk-few few {
			rpm 2
		}
		key sk-broke broke {
			budget 0.000001 per day
		}
		upstream a %s
		model chat {
			to a
		}
		price chat {
			input 1000
			output 1000
		}
	}`, up.v1()))
	get := func(path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", relayBase+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, readAll(t, resp)
	}
	// Reads first: were they counted, the two chat requests below could
	// not both pass.
	for range 3 {
		for _, path := range []string{"/v1/balance", "/v1/models", "/v1/models/chat"} {
			if code, body := get(path, "sk-few"); code != 200 {
				t.Fatalf("GET %s with rpm 2: %d %s", path, code, body)
			}
		}
	}
	for i := range 2 {
		if resp := post(t, chatBody, "Authorization", "Bearer sk-few"); resp.StatusCode != 200 {
			t.Fatalf("chat request %d of the rpm's 2: %d %s", i+1, resp.StatusCode, readAll(t, resp))
		} else {
			readAll(t, resp)
		}
	}
	resp := post(t, chatBody, "Authorization", "Bearer sk-few")
	if body := readAll(t, resp); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a third chat request with rpm 2: %d %s", resp.StatusCode, body)
	}
	code, body := get("/v1/balance", "sk-few")
	if code != 200 || !strings.Contains(body, `"rpm":{"limit":2,"remaining":0`) {
		t.Errorf("balance once the rpm is spent: %d %s", code, body)
	}
	if code, body := get("/v1/models", "sk-few"); code != 200 {
		t.Errorf("models once the rpm is spent: %d %s", code, body)
	}

	// A key over its budget still reads its balance, which says so.
	if resp := post(t, chatBody, "Authorization", "Bearer sk-broke"); resp.StatusCode != 200 {
		t.Fatalf("the broke key's first request: %d %s", resp.StatusCode, readAll(t, resp))
	} else {
		readAll(t, resp)
	}
	waitFor(t, 5*time.Second, "the budget spent", func() bool {
		resp := post(t, chatBody, "Authorization", "Bearer sk-broke")
		readAll(t, resp)
		return resp.StatusCode == http.StatusTooManyRequests
	})
	if code, body := get("/v1/balance", "sk-broke"); code != 200 || !strings.Contains(body, `"remaining_usd":0`) {
		t.Errorf("balance once the budget is spent: %d %s", code, body)
	}
}

// TestKeyExpiresSoon: a token within 14 days of its expiry is logged once a
// day (not per request), and the status view marks its key.
func TestKeyExpiresSoon(t *testing.T) {
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	expires := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	logFile := startRelay(t, fmt.Sprintf(`llm_relay {
		key sk-going going {
			expires %s
		}
		key sk-staying staying {
			expires 2099-01-01
		}
		upstream a %s
		model chat {
			to a
		}
	}`, expires.Format(time.RFC3339), up.v1()))
	for _, tok := range []string{"sk-going", "sk-going", "sk-staying"} {
		resp := post(t, chatBody, "Authorization", "Bearer "+tok)
		if body := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tok, resp.StatusCode, body)
		}
	}
	if n := strings.Count(readLog(t, logFile), `"msg":"key expires soon"`); n != 1 {
		t.Errorf("%d expiry warnings for two requests, want 1", n)
	}
	mustLog(t, logFile, "warn", "key expires soon", "key", "going")
	var st struct {
		Keys []struct {
			Key         string    `json:"key"`
			Expires     time.Time `json:"expires"`
			ExpiresSoon bool      `json:"expires_soon"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(getStatusRaw(t, adminStatusURL), &st); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, k := range st.Keys {
		switch k.Key {
		case "going":
			seen++
			if !k.ExpiresSoon || !k.Expires.Equal(expires) {
				t.Errorf("going: %+v, want expires %v and expires_soon", k, expires)
			}
		case "staying":
			seen++
			if k.ExpiresSoon {
				t.Errorf("staying: %+v, want not expires_soon", k)
			}
		}
	}
	if seen != 2 {
		t.Errorf("status keys %+v", st.Keys)
	}
}
