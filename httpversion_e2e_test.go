package llmrelay_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestHTTPVersionHeader: `X-HTTP-Version: 1.1` sends that request to the
// upstream over HTTP/1.1, where the upstream would otherwise get HTTP/2;
// the header itself never reaches the upstream.
func TestHTTPVersionHeader(t *testing.T) {
	var mu sync.Mutex
	var protos []string
	var leaked bool
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos = append(protos, r.Proto)
		leaked = leaked || r.Header.Get("X-HTTP-Version") != ""
		mu.Unlock()
		answerJSON(w, 200, okCompletion)
	}))
	up.EnableHTTP2 = true
	up.StartTLS()
	t.Cleanup(up.Close)
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream tls %s/v1 {
			transport http {
				tls_insecure_skip_verify
			}
		}
		model h-version {
			to tls
		}
	}`, up.URL))

	body := `{"model":"h-version","messages":[{"role":"user","content":"hi"}]}`
	for _, h := range [][]string{nil, {"X-HTTP-Version", "1.1"}, {"X-HTTP-Version", "2"}} {
		resp := post(t, body, h...)
		if b := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("%v: %d %s", h, resp.StatusCode, b)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"HTTP/2.0", "HTTP/1.1", "HTTP/2.0"}; fmt.Sprint(protos) != fmt.Sprint(want) {
		t.Errorf("the upstream saw %v; want %v (HTTP/1.1 only for the request that asked)", protos, want)
	}
	if leaked {
		t.Error("X-HTTP-Version reached the upstream")
	}
}
