package llmrelay_test

import (
	"net/http"
	"strings"
	"testing"
)

// An upstream that rejects the relay's own key (401/403) is never passed
// through: its body may quote part of that key. The relay moves on to the
// next target, or answers its own 502.
func TestUpstreamAuthFailureNotPassedThrough(t *testing.T) {
	bad := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 401, `{"error":{"message":"Incorrect API key provided: sk-proj-****abcd","type":"invalid_request_error","code":"invalid_api_key"}}`)
	})
	good := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "provider_session=secret")
		w.Header().Set("OpenAI-Organization", "org-relay")
		answerJSON(w, 200, okCompletion)
	})
	startRelay(t, `llm_relay {
		upstream bad `+bad.v1()+` {
			api_key sk-proj-relay-key-abcd
		}
		upstream good `+good.v1()+`
		model chat {
			to bad
			to good
		}
		model only-bad {
			to bad
		}
	}`)
	resp := post(t, chatBody)
	body := readAll(t, resp)
	if resp.StatusCode != 200 || body != okCompletion || resp.Header.Get("X-Relay-Upstream") != "good" {
		t.Fatalf("status %d upstream %q body %s", resp.StatusCode, resp.Header.Get("X-Relay-Upstream"), body)
	}
	if resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("OpenAI-Organization") != "" {
		t.Errorf("the provider account's headers reached the client: %v", resp.Header)
	}
	resp = post(t, strings.Replace(chatBody, `"chat"`, `"only-bad"`, 1))
	body = readAll(t, resp)
	if e := decodeErr(t, body); resp.StatusCode != 502 || e.Error.Code != "all_upstreams_failed" {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if strings.Contains(body, "sk-") || strings.Contains(body, "abcd") {
		t.Fatalf("the upstream's key fragment reached the client: %s", body)
	}
}
