package llmrelay_test

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// contSite runs the continuation tests' simulators on :9072: /drop/
// breaks its stream after a few events, /good/ answers whole; both with
// the same seed, so they generate the same answer.
const contSite = `http://127.0.0.1:9072 {
	handle /drop/* {
		llm_simulator {
			seed 11
			reasoning_tokens 0
			content_tokens 40
			pattern steady 0
			drop_after 8
		}
	}
	handle /good/* {
		llm_simulator {
			seed 11
			reasoning_tokens 0
			content_tokens 40
			pattern steady 0
		}
	}
}`

// TestContinuationSmoke: a Chat stream that breaks after its commit point
// is continued on the next target: no in-band error, the log line says so.
func TestContinuationSmoke(t *testing.T) {
	logFile := startRelay(t, `llm_relay {
		key sk-test-client
		upstream drop http://127.0.0.1:9072/drop/v1 {
			api chat
		}
		upstream good http://127.0.0.1:9072/good/v1 {
			api chat
		}
		model m {
			to drop
			to good
		}
	}`, contSite)
	req, _ := http.NewRequest(http.MethodPost, relayBase+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-test-client")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := string(body)
	if strings.Contains(s, "upstream_stream") || !strings.HasSuffix(s, "data: [DONE]\n\n") {
		t.Fatalf("the stream was not continued:\n%s", s)
	}
	if !strings.Contains(s, ": relay-continued upstream=good") {
		t.Errorf("no seam comment:\n%s", s)
	}
	// The status page's recent failovers show the break and who
	// continued it.
	resp, err = http.Get(adminStatusURL)
	if err != nil {
		t.Fatal(err)
	}
	status, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(status), "(in the answer): continued on good") {
		t.Errorf("the status view's failovers do not show the continuation:\n%s", status)
	}
	waitFor(t, 5*time.Second, "the log line", func() bool {
		logs, _ := os.ReadFile(logFile)
		return strings.Contains(string(logs), `"continued":[{"from":"drop (m)","to":"good (m)"`)
	})
}
