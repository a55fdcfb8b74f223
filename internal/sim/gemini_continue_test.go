package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// gemAsk posts body to generateContent and to streamGenerateContent
// (SSE), with extra headers, and returns both reassembled.
func gemAsk(t *testing.T, base string, header map[string]string, body string) (whole, streamed gemAnswer) {
	t.Helper()
	for i, path := range []string{"/v1beta/models/m:generateContent", "/v1beta/models/m:streamGenerateContent?alt=sse"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+path, strings.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
		var chunks []gemChunk
		if i == 0 {
			var c gemChunk
			if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
				t.Fatal(err)
			}
			chunks = []gemChunk{c}
		} else if chunks, err = readGemSSE(t, resp.Body); err != nil {
			t.Fatal(err)
		}
		a := reassembleGem(t, chunks)
		if i == 0 {
			whole = a
		} else {
			streamed = a
		}
	}
	return whole, streamed
}

// gemTurns builds a request body from (role, text) pairs, thoughts on.
func gemTurns(system string, turns ...[2]string) string {
	type part struct {
		Text string `json:"text"`
	}
	type content struct {
		Role  string `json:"role,omitempty"`
		Parts []part `json:"parts"`
	}
	body := map[string]any{"generationConfig": map[string]any{"thinkingConfig": map[string]any{"includeThoughts": true}}}
	var cs []content
	for _, t := range turns {
		cs = append(cs, content{t[0], []part{{t[1]}}})
	}
	body["contents"] = cs
	if system != "" {
		body["systemInstruction"] = content{Parts: []part{{system}}}
	}
	b, _ := json.Marshal(body)
	return string(b)
}

func TestGeminiEchoHandoff(t *testing.T) {
	_, ts := startServer(t, gemCfg)
	wrapped := "<think>\nfirst, the 推理 é\n</think>"
	echo := map[string]string{EchoHeader: EchoHandoff}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"user", gemTurns("", [2]string{"user", "hi " + wrapped}), EchoText("user", "first, the 推理 é")},
		{"system", gemTurns(wrapped, [2]string{"user", "hi"}), EchoText("system", "first, the 推理 é")},
		{"prefill", gemTurns("", [2]string{"user", "hi"}, [2]string{"model", wrapped}), EchoText("prefill", "first, the 推理 é")},
		{"none", gemTurns("", [2]string{"user", "hi"}), EchoText("none", "")},
	} {
		whole, streamed := gemAsk(t, ts.URL, echo, tc.body)
		for _, a := range []gemAnswer{whole, streamed} {
			if a.text != tc.want || a.thoughts != "" || len(a.signatures) != 0 || a.usage["thoughtsTokenCount"] != 0 {
				t.Errorf("%s: text %q (want %q), thoughts %q, signatures %q, usage %v", tc.name, a.text, tc.want, a.thoughts, a.signatures, a.usage)
			}
		}
	}
}

func TestGeminiContinuation(t *testing.T) {
	wantR, wantC := Texts(gemCfg)
	full := strings.Join(wantC, "")
	soFar := strings.Join(wantC[:3], "")
	_, ts := startServer(t, gemCfg)
	for _, tc := range []struct {
		name, body, want string
		thoughts         bool
	}{
		{"prefill", gemTurns("", [2]string{"user", "hi"}, [2]string{"model", soFar}), full[len(soFar):], false},
		{"instruction", gemTurns("", [2]string{"user", "hi"}, [2]string{"model", soFar}, [2]string{"user", ContinueMarker + " mid-sentence. Continue."}), full[len(soFar):], false},
		{"another answer", gemTurns("", [2]string{"user", "hi"}, [2]string{"model", "not the answer"}), full, true},
	} {
		whole, streamed := gemAsk(t, ts.URL, nil, tc.body)
		for _, a := range []gemAnswer{whole, streamed} {
			if a.text != tc.want || (a.thoughts != "") != tc.thoughts || a.finish != geminiStop {
				t.Errorf("%s: text %q (want %q), thoughts %q, finish %q", tc.name, a.text, tc.want, a.thoughts, a.finish)
			}
			if tc.thoughts && a.thoughts != strings.Join(wantR, "") {
				t.Errorf("%s: thoughts %q", tc.name, a.thoughts)
			}
		}
	}
}
