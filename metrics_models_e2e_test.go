package llmrelay_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestModelListNotCountedAsRequest: GET /v1/models relays nothing: it is
// not counted in llm_relay_requests_total (it was, as alias "none",
// outcome "ok"); a rejection before routing still is, under "none".
func TestModelListNotCountedAsRequest(t *testing.T) {
	startRelay(t, `llm_relay {
		upstream small http://127.0.0.1:9083/small/v1
		model listed {
			to small
		}
	}`, usageSims)
	const okNone = `llm_relay_requests_total{alias="none",outcome="ok",upstream="none"}`
	const badNone = `llm_relay_requests_total{alias="none",outcome="client_error",upstream="none"}`
	m := scrapeMetrics(t)
	before, beforeBad := metricValue(t, m, okNone), metricValue(t, m, badNone)
	for _, path := range []string{"/v1/models", "/v1/models/listed", "/v1/models"} {
		resp, err := http.Get(relayBase + path)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(body, "listed") {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
	resp := post(t, `{"model":"unknown","messages":[]}`)
	readAll(t, resp)
	m = scrapeMetrics(t)
	if got := metricValue(t, m, okNone); got != before {
		t.Errorf("%s went from %v to %v after 3 model-list requests; want them not counted", okNone, before, got)
	}
	if got := metricValue(t, m, badNone); got != beforeBad+1 {
		t.Errorf("%s = %v, want %v: a request for an unknown model is still counted", badNone, got, beforeBad+1)
	}
}
