package sim

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzGemini posts arbitrary bodies to generateContent. Each is answered
// 200 or a Google 400; a 200 answer is well formed, and the same request
// streamed, as SSE and as a JSON array, reassembles to the same thoughts,
// text, signatures, function call, finishReason and final usage.
func FuzzGemini(f *testing.F) {
	f.Add(gemBody(``))
	f.Add(gemBody(withThoughts))
	f.Add(gemBody(forceCall))
	f.Add(gemBody(withThoughts + "," + forceCall))
	f.Add(gemBody(`"generationConfig":{"maxOutputTokens":3,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":0}}`))
	f.Add(gemBody(`"generationConfig":{"maxOutputTokens":-4},"cachedContent":"cachedContents/x","systemInstruction":{"parts":[{"text":"é"}]}`))
	f.Add(`{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"a","response":{}}}]}],` + forceCall + `}`)
	f.Add(`{"tools":[{"functionDeclarations":[]}],"toolConfig":{"functionCallingConfig":{"mode":"any","allowedFunctionNames":[""]}}}`)
	f.Add(`{"contents":null,"generationConfig":null,"toolConfig":{}}`)
	f.Add(`{"contents":[{"parts":[{"text":7}]}]}`)
	f.Add(`[]`)
	f.Add(``)
	s, err := New(Config{Seed: 5, ReasoningTokens: new(5), ContentTokens: new(4), ReasoningPattern: fast, ContentPattern: fast})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		rec := serveRec(s, "/v1beta/models/m:generateContent", body)
		if rec.Code != 200 {
			var e gemChunk
			if rec.Code != 400 || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error == nil || e.Error.Status != "INVALID_ARGUMENT" {
				t.Fatalf("status %d body %s", rec.Code, rec.Body)
			}
			return
		}
		var whole gemChunk
		if err := json.Unmarshal(rec.Body.Bytes(), &whole); err != nil {
			t.Fatalf("bad answer %s: %v", rec.Body, err)
		}
		w := reassembleGem(t, []gemChunk{whole})
		if w.finish != geminiStop && w.finish != geminiMaxTokens {
			t.Fatalf("finish %q", w.finish)
		}
		if len(w.calls) > 0 && (w.text != "" || w.calls[0].FunctionCall.Name == "" && !bytes.Contains([]byte(body), []byte(`""`))) {
			t.Fatalf("a call with text, or unnamed: %s", rec.Body)
		}
		for _, path := range []string{"/v1beta/models/m:streamGenerateContent?alt=sse", "/v1beta/models/m:streamGenerateContent"} {
			rec := serveRec(s, path, body)
			if rec.Code != 200 {
				t.Fatalf("%s: status %d", path, rec.Code)
			}
			var chunks []gemChunk
			if path[len(path)-3:] == "sse" {
				if chunks, err = readGemSSE(t, rec.Body); err != nil {
					t.Fatal(err)
				}
			} else if err := json.Unmarshal(rec.Body.Bytes(), &chunks); err != nil {
				t.Fatalf("array %s: %v", rec.Body, err)
			}
			a := reassembleGem(t, chunks)
			if a.text != w.text || a.thoughts != w.thoughts || a.finish != w.finish || !slices.Equal(a.signatures, w.signatures) || !reflect.DeepEqual(a.usage, w.usage) {
				t.Fatalf("%s: stream %+v, whole %+v", path, a, w)
			}
			// The call's id is per request (call_sim_<n>); the rest is the same.
			sameCall := func(x, y gemPart) bool {
				return x.FunctionCall.Name == y.FunctionCall.Name && bytes.Equal(x.FunctionCall.Args, y.FunctionCall.Args) &&
					strings.HasPrefix(x.FunctionCall.ID, "call_sim_") && strings.HasPrefix(y.FunctionCall.ID, "call_sim_")
			}
			if len(a.calls) != len(w.calls) || len(a.calls) == 1 && !sameCall(a.calls[0], w.calls[0]) {
				t.Fatalf("%s: calls %+v, whole %+v", path, a.calls, w.calls)
			}
		}
	})
}
