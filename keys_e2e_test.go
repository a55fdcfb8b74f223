package llmrelay_test

// Client keys: the headers they come in, and what later handlers, the
// access log and the upstream see of them, through a real Caddy.

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

// alice:s3cret for basic_auth (bcrypt, cost 4: fast enough for a test).
const aliceHash = "$2a$04$1H9pvSH2z6FgHwdxkEJrCuxKOObribaA7lONB9utbtzkJ0gvpzOrK"

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// TestClientKeyHeaders: the key is taken from Authorization: Bearer,
// X-Api-Key, Api-Key or X-Goog-Api-Key, in that order, and none of them
// reaches the upstream.
func TestClientKeyHeaders(t *testing.T) {
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	startRelay(t, `llm_relay {
		key sk-team-hdr team-hdr
		upstream u `+up.v1()+` {
			api_key sk-upstream
		}
		model m {
			to u
		}
	}`)
	body := `{"model":"m","messages":[]}`
	cases := []struct {
		name   string
		header []string
		want   int
	}{
		{"bearer (OpenAI SDKs)", []string{"Authorization", "Bearer sk-team-hdr"}, 200},
		{"x-api-key (Anthropic SDKs)", []string{"x-api-key", "sk-team-hdr"}, 200},
		{"api-key (Azure SDKs)", []string{"api-key", "sk-team-hdr"}, 200},
		{"x-goog-api-key (Gemini SDKs)", []string{"x-goog-api-key", "sk-team-hdr"}, 200},
		{"basic credentials do not hide x-api-key", []string{"Authorization", basic("alice", "s3cret"), "x-api-key", "sk-team-hdr"}, 200},
		{"bearer comes first", []string{"Authorization", "Bearer wrong", "x-api-key", "sk-team-hdr"}, 401},
		{"x-api-key comes before api-key", []string{"x-api-key", "wrong", "api-key", "sk-team-hdr"}, 401},
		{"a wrong key", []string{"x-goog-api-key", "wrong"}, 401},
	}
	for _, c := range cases {
		resp := post(t, body, c.header...)
		got := readAll(t, resp)
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d: %s", c.name, resp.StatusCode, c.want, got)
		}
	}
	seen := up.requests()
	if len(seen) != 5 {
		t.Fatalf("upstream got %d requests, want 5", len(seen))
	}
	for i, r := range seen {
		for _, h := range []string{"X-Api-Key", "Api-Key", "X-Goog-Api-Key"} {
			if v := r.header.Get(h); v != "" {
				t.Errorf("request %d: upstream got %s: %q", i+1, h, v)
			}
		}
		if got := r.header.Get("Authorization"); got != "Bearer sk-upstream" {
			t.Errorf("request %d: upstream Authorization %q, want the upstream's own key", i+1, got)
		}
	}
}

// TestBasicAuthInFrontOfKeyedRelay: a Caddy basic_auth in front of the
// relay, and the relay key in x-api-key: both pass.
func TestBasicAuthInFrontOfKeyedRelay(t *testing.T) {
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	startRelay(t, `route {
		basic_auth {
			alice `+aliceHash+`
		}
		llm_relay {
			key sk-team-basic team-basic
			upstream u `+up.v1()+`
			model m {
				to u
			}
		}
	}`)
	body := `{"model":"m","messages":[]}`
	resp := post(t, body, "Authorization", basic("alice", "s3cret"), "x-api-key", "sk-team-basic")
	if got := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("basic_auth + x-api-key: status %d: %s", resp.StatusCode, got)
	}
	resp = post(t, body, "Authorization", basic("alice", "s3cret"), "x-api-key", "wrong")
	if got := readAll(t, resp); resp.StatusCode != 401 || decodeErr(t, got).Error.Code == "" {
		t.Errorf("basic_auth + a wrong relay key: status %d: %s", resp.StatusCode, got)
	}
	resp = post(t, body, "x-api-key", "sk-team-basic")
	readAll(t, resp)
	if resp.StatusCode != 401 || resp.Header.Get("Www-Authenticate") == "" {
		t.Errorf("no basic credentials: status %d, want basic_auth's 401", resp.StatusCode)
	}
	if n := len(up.requests()); n != 1 {
		t.Fatalf("upstream got %d requests, want 1", n)
	}
	if got := up.requests()[0].header.Get("Authorization"); got != "" {
		t.Errorf("the basic credentials reached the upstream: %q", got)
	}
}

// TestClientKeyHiddenFromLaterHandlers: once the relay has let a request
// in, its key headers are gone from the request: a deferred `header` op
// that reads them (as any later handler, error route or log_append
// placeholder would) finds nothing. And with the access log filter of
// docs/configuration.md, the token is not in the access log.
func TestClientKeyHiddenFromLaterHandlers(t *testing.T) {
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	accessLog := t.TempDir() + "/access.log"
	startRelay(t, `log {
		output file `+accessLog+`
		format filter {
			request>headers>X-Api-Key delete
			request>headers>Api-Key delete
			request>headers>X-Goog-Api-Key delete
		}
	}
	header >X-Seen "seen:{http.request.header.Authorization}|{http.request.header.X-Api-Key}|{http.request.header.Api-Key}|{http.request.header.X-Goog-Api-Key}"
	llm_relay {
		key sk-secret-hidden team-hidden
		upstream u `+up.v1()+`
		model m {
			to u
		}
	}`)
	body := `{"model":"m","messages":[]}`
	for _, h := range []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"} {
		v := "sk-secret-hidden"
		if h == "Authorization" {
			v = "Bearer " + v
		}
		resp := post(t, body, h, v)
		readAll(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", h, resp.StatusCode)
		}
		if got := resp.Header.Get("X-Seen"); got != "seen:|||" {
			t.Errorf("%s: a later handler saw the client's credential headers: %q", h, got)
		}
	}
	waitFor(t, 5e9, "4 access log lines", func() bool {
		return strings.Count(readLog(t, accessLog), `"handled request"`) >= 4
	})
	if log := readLog(t, accessLog); strings.Contains(log, "sk-secret-hidden") {
		t.Errorf("the client key is in the access log:\n%s", log)
	}
}
