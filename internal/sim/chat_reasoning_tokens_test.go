package sim

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReasoningTokensHeader(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func(h string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set(ReasoningTokensHeader, h)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	if code, body := post("3"); code != 200 || !strings.Contains(body, `"reasoning_tokens":3`) {
		t.Errorf("3: %d %s", code, body)
	}
	if code, body := post("100000"); code != 200 || !strings.Contains(body, `"reasoning_tokens":60`) {
		t.Errorf("more than it has: %d %s", code, body)
	}
	if code, _ := post("-1"); code != http.StatusBadRequest {
		t.Errorf("-1: %d, want 400", code)
	}
}
