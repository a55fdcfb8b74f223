package llmrelay_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const (
	clientKey   = "sk-client-SECRET-1111"
	upstreamKey = "sk-upstream-SECRET-2222"
)

func TestKeysNeverCrossTheRelay(t *testing.T) {
	t.Setenv("TEST_RELAY_CLIENT_KEY", clientKey)
	t.Setenv("TEST_RELAY_UPSTREAM_KEY", upstreamKey)
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo-Auth", "none") // an upstream that tried to leak would set the key here
		streamEvents(w, 0, chunk("ok"), "[DONE]")
	})
	other := sha256.Sum256([]byte("sk-second-client"))
	logFile := startRelay(t, fmt.Sprintf(`llm_relay {
		key {env.TEST_RELAY_CLIENT_KEY} team-a
		key sha256:%s team-b
		upstream a %s {
			api_key {env.TEST_RELAY_UPSTREAM_KEY}
			header OpenAI-Organization org-123
		}
		model chat {
			to a upstream-model {
				set reasoning_effort low
				set reasoning.max_tokens 2000
				unset temperature
			}
		}
	}`, hex.EncodeToString(other[:]), a.v1()))

	body := `{"model":"chat","stream":true,"temperature":0.5,"relay":{"mode":"pace"},"messages":[{"role":"user","content":"hi"}]}`
	resp := post(t, body,
		"Authorization", "Bearer "+clientKey,
		"X-Api-Key", clientKey,
		"Cookie", "session=abc",
		"X-Relay-Mode", "pace",
		"X-Custom", "kept",
		"Accept-Encoding", "gzip")
	got := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	reqs := a.requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests", len(reqs))
	}
	up := reqs[0]
	if auth := up.header.Get("Authorization"); auth != "Bearer "+upstreamKey {
		t.Errorf("upstream Authorization = %q, want the upstream key", auth)
	}
	for _, h := range []string{"X-Api-Key", "Cookie", "X-Relay-Mode"} {
		if v := up.header.Get(h); v != "" {
			t.Errorf("upstream received %s: %q", h, v)
		}
	}
	if up.header.Get("Accept-Encoding") != "identity" || up.header.Get("X-Custom") != "kept" || up.header.Get("Openai-Organization") != "org-123" {
		t.Errorf("upstream headers: %v", up.header)
	}
	if up.path != "/v1/chat/completions" {
		t.Errorf("upstream path %q", up.path)
	}
	if up.body["model"] != "upstream-model" || up.body["reasoning_effort"] != "low" {
		t.Errorf("upstream body %v", up.body)
	}
	if _, ok := up.body["relay"]; ok {
		t.Errorf("the relay field reached the upstream")
	}
	if _, ok := up.body["temperature"]; ok {
		t.Errorf("unset temperature reached the upstream")
	}
	if r, _ := up.body["reasoning"].(map[string]any); r["max_tokens"] != float64(2000) {
		t.Errorf("nested set: reasoning = %v", up.body["reasoning"])
	}

	// The sha256: key works too, also as x-api-key; a wrong key and no key get 401.
	if resp := post(t, chatStreamBody, "Authorization", "Bearer sk-second-client"); resp.StatusCode != 200 {
		t.Errorf("sha256 key: status %d", resp.StatusCode)
	} else {
		readAll(t, resp)
	}
	if resp := post(t, chatStreamBody, "X-Api-Key", "sk-second-client"); resp.StatusCode != 200 {
		t.Errorf("x-api-key: status %d", resp.StatusCode)
	} else {
		readAll(t, resp)
	}
	if v := a.requests()[len(a.requests())-1].header.Get("X-Api-Key"); v != "" {
		t.Errorf("the client's x-api-key reached the upstream: %q", v)
	}
	for _, hdr := range [][]string{{"Authorization", "Bearer wrong"}, {}} {
		resp := post(t, chatStreamBody, hdr...)
		body := readAll(t, resp)
		if resp.StatusCode != 401 || decodeErr(t, body).Error.Code != "invalid_api_key" {
			t.Errorf("headers %v: status %d body %s", hdr, resp.StatusCode, body)
		}
	}
	if len(a.requests()) != 3 {
		t.Errorf("rejected requests reached the upstream")
	}

	// Neither key appears in the responses or the log; the key name does.
	for _, h := range resp.Header {
		for _, v := range h {
			if strings.Contains(v, "SECRET") {
				t.Errorf("a key leaked into a response header: %q", v)
			}
		}
	}
	if strings.Contains(got, "SECRET") {
		t.Errorf("a key leaked into the response body")
	}
	log := readLog(t, logFile)
	if strings.Contains(log, clientKey) || strings.Contains(log, upstreamKey) {
		t.Errorf("a key leaked into the log")
	}
	mustContain(t, log, `"key":"team-a"`, `"key":"team-b"`, `"msg":"relayed"`, `"upstream":"a"`, `"msg":"upstream attempt"`)
}

func TestOpenRelayWarnsOnceAndServes(t *testing.T) {
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) { answerJSON(w, 200, okCompletion) })
	logFile := startRelay(t, fmt.Sprintf("llm_relay {\n upstream a %s\n model chat {\n to a\n }\n }", a.v1()))
	resp := post(t, chatBody)
	if body := readAll(t, resp); resp.StatusCode != 200 || body != okCompletion {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if n := strings.Count(readLog(t, logFile), "the relay is open"); n != 1 {
		t.Errorf("open-relay warning logged %d times, want once", n)
	}
}

func TestRelayOwnErrors(t *testing.T) {
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) { answerJSON(w, 200, okCompletion) })
	startRelay(t, fmt.Sprintf(`llm_relay {
		max_body 1KiB
		upstream a %s
		model chat {
			to a
		}
		model other {
			to a
		}
	}`, a.v1()))

	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"bad json", "POST", "/v1/chat/completions", `{"model":`, 400, "invalid_json"},
		{"not an object", "POST", "/v1/chat/completions", `[1,2]`, 400, "invalid_json"},
		{"no model", "POST", "/v1/chat/completions", `{"messages":[]}`, 400, "missing_model"},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"gpt-9"}`, 404, "model_not_found"},
		{"too large", "POST", "/v1/chat/completions", `{"model":"chat","x":"` + strings.Repeat("a", 2048) + `"}`, 413, "request_too_large"},
		// chunked: no Content-Length, the limit found while reading
		{"too large chunked", "POST", "/v1/chat/completions", `{"model":"chat","x":"` + strings.Repeat("a", 2048) + `"}`, 413, "request_too_large"},
		{"one byte too large chunked", "POST", "/v1/chat/completions", `{"model":"chat","x":"` + strings.Repeat("a", 1002) + `"}`, 413, "request_too_large"},
		{"wrong method", "PUT", "/v1/chat/completions", `{}`, 405, "method_not_allowed"},
		{"get on completions", "GET", "/v1/chat/completions", ``, 405, "method_not_allowed"},
		{"post to models", "POST", "/v1/models", `{}`, 405, "method_not_allowed"},
		{"unknown model object", "GET", "/v1/models/nope", ``, 404, "model_not_found"},
		{"outside /v1", "POST", "/chat/completions", `{"model":"chat"}`, 404, "unknown_url"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var rd io.Reader = strings.NewReader(c.body)
			if strings.HasSuffix(c.name, "chunked") {
				rd = io.MultiReader(rd) // a reader of unknown length: sent chunked
			}
			req, _ := http.NewRequest(c.method, relayBase+c.path, rd)
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			if e := decodeErr(t, body); e.Error.Code != c.code || e.Error.Message == "" || e.Error.Type == "" {
				t.Errorf("error %+v, want code %s", e, c.code)
			}
		})
	}
	if n := len(a.requests()); n != 0 {
		t.Errorf("%d rejected requests reached the upstream", n)
	}

	// Exactly max_body, chunked: read whole and relayed.
	full := `{"model":"chat","x":"` + strings.Repeat("b", 1001) + `"}`
	req, _ := http.NewRequest("POST", relayBase+"/v1/chat/completions", io.MultiReader(strings.NewReader(full)))
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("a chunked body of exactly max_body: status %d: %s", resp.StatusCode, body)
	}
	if seen := a.requests(); len(seen) != 1 || seen[0].body["x"] != strings.Repeat("b", 1001) {
		t.Errorf("the chunked body did not reach the upstream whole")
	}

	resp, err = httpClient.Get(relayBase + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); body != `{"object":"list","data":[{"id":"chat","object":"model","created":0,"owned_by":"llm-relay"},{"id":"other","object":"model","created":0,"owned_by":"llm-relay"}]}` {
		t.Errorf("/v1/models = %s", body)
	}
}

func TestWildcardForwardsModelUnchanged(t *testing.T) {
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) { answerJSON(w, 200, okCompletion) })
	startRelay(t, fmt.Sprintf("llm_relay {\n upstream a %s\n model * {\n to a\n }\n }", a.v1()))
	resp := post(t, `{"model":"some-new-model","messages":[]}`)
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Relay-Model") != "some-new-model" {
		t.Fatalf("status %d model %q", resp.StatusCode, resp.Header.Get("X-Relay-Model"))
	}
	if m := a.requests()[0].body["model"]; m != "some-new-model" {
		t.Errorf("upstream got model %v", m)
	}
}

func TestEveryEventIsFlushedAtOnce(t *testing.T) {
	// The upstream sends the next event only after the client has received
	// the previous one, so a relay that buffers would deadlock (bounded by
	// the wait below) instead of passing.
	received := make(chan struct{})
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 3; i++ {
			_, _ = w.Write([]byte("data: " + chunk(fmt.Sprint(i)) + "\n\n"))
			w.(http.Flusher).Flush()
			select {
			case <-received:
			case <-time.After(5 * time.Second):
				return
			case <-r.Context().Done():
				return
			}
		}
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	})
	startRelay(t, fmt.Sprintf("llm_relay {\n upstream a %s\n model chat {\n to a\n }\n }", a.v1()))
	resp := post(t, chatStreamBody)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := 0; i < 3; i++ {
		start := time.Now()
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if line != "data: "+chunk(fmt.Sprint(i))+"\n" {
			t.Fatalf("event %d: %q", i, line)
		}
		if waited := time.Since(start); waited > 4*time.Second {
			t.Fatalf("event %d arrived only after %s: not flushed", i, waited)
		}
		_, _ = br.ReadString('\n') // the blank line
		received <- struct{}{}
	}
}
