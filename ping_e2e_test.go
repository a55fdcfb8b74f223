package llmrelay_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestPing: GET /v1/ping answers without a key, with the edge's region and
// time, and leaves no log line or upstream request behind; the rest of the
// relay still wants its key.
func TestPing(t *testing.T) {
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	logFile := startRelay(t, fmt.Sprintf(`llm_relay {
		key sk-test-client
		region eu-west
		upstream a %s
		model chat {
			to a
		}
	}`, up.v1()))
	before := time.Now()
	resp, err := httpClient.Get(relayBase + "/v1/ping")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /v1/ping: %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var p struct {
		Object, Region string
		Time           time.Time
		UnixMS         int64 `json:"unix_ms"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if p.Object != "relay.ping" || p.Region != "eu-west" || p.Time.Before(before.Add(-time.Second)) || p.Time.UnixMilli() != p.UnixMS {
		t.Errorf("ping answer %+v", p)
	}
	resp, err = httpClient.Get(relayBase + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/models without a key: %d, want 401", resp.StatusCode)
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("the ping reached the upstream %d times", n)
	}
	b, _ := os.ReadFile(logFile)
	if strings.Contains(string(b), "/v1/ping") || strings.Count(string(b), `"msg":"relayed"`) != 1 {
		t.Errorf("the ping was logged (want only the 401's relayed line):\n%s", b)
	}
}
