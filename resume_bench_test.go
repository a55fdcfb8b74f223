package llmrelay

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// BenchmarkResumeJournal is what `resume { }` costs a stream, in
// process, without sockets between the relay and its client: the same
// 22-event Chat stream from a loopback upstream, through a relay without
// a resume block (off) and with one (journaled: every event cut out,
// copied into the in-memory journal and sent with its id; the store
// holding up to its default 1000 journals, as it does after the first
// thousand streams). Compare ns/op, B/op and allocs/op:
//
//	go test -run '^$' -bench BenchmarkResumeJournal -benchtime 8000x .
//
// journal-B/stream is the event data one stream's journal holds.
func BenchmarkResumeJournal(b *testing.B) {
	blocks := []string{`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`}
	for i := range 20 {
		blocks = append(blocks, `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" tok`+strconv.Itoa(i)+`"},"finish_reason":null}]}`)
	}
	blocks = append(blocks, `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, "[DONE]")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, bl := range blocks {
			_, _ = io.WriteString(w, "data: "+bl+"\n\n")
		}
	}))
	defer up.Close()
	for _, mode := range []string{"off", "journaled"} {
		b.Run(mode, func(b *testing.B) {
			resume := ""
			if mode == "journaled" {
				resume = `, "resume": {"coalesce": -1}`
			}
			h := benchRelay(b, fmt.Sprintf(`{
				"upstreams": [{"name": "a", "base_url": %q, "api": "chat"}],
				"models": [{"alias": "m", "targets": [{"upstream": "a"}]}]%s
			}`, up.URL+"/v1", resume))
			next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
			const body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			serve := func() string {
				req := httptest.NewRequest(http.MethodPost, "http://relay.test/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+loopKey)
				rec := httptest.NewRecorder()
				if err := h.ServeHTTP(rec, req, next); err != nil {
					b.Fatal(err)
				}
				out := rec.Body.String()
				if !strings.HasSuffix(out, "data: [DONE]\n\n") || (mode == "journaled") != strings.Contains(out, "\nid: rs_") {
					b.Fatalf("not a whole %s stream:\n%s", mode, out)
				}
				return out
			}
			if mode == "journaled" {
				for range defaultResumeMaxStreams { // a full store, as in steady state
					serve()
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				serve()
			}
			b.StopTimer()
			if mode == "journaled" {
				st := h.resume.store.Stats(time.Now())
				b.ReportMetric(float64(st.Bytes)/float64(st.Streams), "journal-B/stream")
			}
		})
	}
}
