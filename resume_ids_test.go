package llmrelay

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestResumeResponsesIDsAreTheRelays: a Responses stream translated from
// a Chat upstream that gives every answer the same chunk id (some
// providers do; the chaos suite's upstream does) still gets a response
// id of its own, so a starting_after resume of one stream is answered
// from that stream. Found by relaychaos resume-responses: the response
// id was resp_<the chunk id>, two streams of one key had the same one,
// and a resume of the first replayed the second.
func TestResumeResponsesIDsAreTheRelays(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		word := "alpha"
		if strings.Contains(string(b), "beta") {
			word = "beta"
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{`{"role":"assistant","content":""}`, `{"content":"` + word + `"}`} {
			_, _ = io.WriteString(w, `data: {"id":"chatcmpl-same","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`+d+`,"finish_reason":null}]}`+"\n\n")
		}
		_, _ = io.WriteString(w, `data: {"id":"chatcmpl-same","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	h := benchRelay(t, `{
		"upstreams": [{"name": "a", "base_url": "`+up.URL+`/v1", "api": "chat"}],
		"models": [{"alias": "m", "targets": [{"upstream": "a"}]}],
		"resume": {}
	}`)
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	serve := func(method, path, body string) string {
		req := httptest.NewRequest(method, "http://relay.test"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+loopKey)
		rec := httptest.NewRecorder()
		if err := h.ServeHTTP(rec, req, next); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	responseID := func(stream string) string {
		for _, line := range strings.Split(stream, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"response.created"`) {
				var ev struct {
					Response struct{ ID string } `json:"response"`
				}
				_ = json.Unmarshal([]byte(d), &ev)
				return ev.Response.ID
			}
		}
		t.Fatalf("no response.created in %s", stream)
		return ""
	}
	a := serve(http.MethodPost, "/v1/responses", `{"model":"m","stream":true,"input":"say alpha"}`)
	b := serve(http.MethodPost, "/v1/responses", `{"model":"m","stream":true,"input":"say beta"}`)
	idA, idB := responseID(a), responseID(b)
	if idA == idB || !strings.HasPrefix(idA, "resp_") {
		t.Fatalf("two streams have the response ids %q and %q", idA, idB)
	}
	if !strings.Contains(a, `"delta":"alpha"`) || !strings.Contains(b, `"delta":"beta"`) {
		t.Fatalf("the streams are not their answers:\n%s\n%s", a, b)
	}
	rest := serve(http.MethodGet, "/v1/responses/"+idA+"?stream=true&starting_after=0", "")
	if !strings.Contains(rest, `"delta":"alpha"`) || strings.Contains(rest, "beta") {
		t.Fatalf("the resume of %s is not its stream:\n%s", idA, rest)
	}
	if got := serve(http.MethodGet, "/v1/responses/"+idA, ""); !strings.Contains(got, `"id":"`+idA+`"`) || !strings.Contains(got, "alpha") {
		t.Fatalf("GET %s: %s", idA, got)
	}
}
