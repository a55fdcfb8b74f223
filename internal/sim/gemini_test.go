package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// gemCfg is a small fast config with both phases.
var gemCfg = Config{Seed: 11, ReasoningTokens: new(7), ContentTokens: new(5), ReasoningPattern: fast, ContentPattern: fast}

// gemPart and gemChunk decode what the simulator sends, loosely, so a
// missing or misnamed member shows up as a zero value.
type gemPart struct {
	Text             *string `json:"text"`
	Thought          bool    `json:"thought"`
	ThoughtSignature string  `json:"thoughtSignature"`
	FunctionCall     *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
}

type gemChunk struct {
	Candidates []struct {
		Content struct {
			Parts []gemPart `json:"parts"`
			Role  string    `json:"role"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
		Index        int    `json:"index"`
	} `json:"candidates"`
	UsageMetadata gemUsage `json:"usageMetadata"`
	ModelVersion  string   `json:"modelVersion"`
	ResponseID    string   `json:"responseId"`
	Error         *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type       string `json:"@type"`
			RetryDelay string `json:"retryDelay"`
		} `json:"details"`
	} `json:"error"`
}

// gemUsage is usageMetadata's counts by name; promptTokensDetails,
// the one non-count, is checked to match promptTokenCount.
type gemUsage map[string]int

func (u *gemUsage) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*u = gemUsage{}
	for k, v := range raw {
		if k == "promptTokensDetails" {
			var d []struct {
				Modality   string `json:"modality"`
				TokenCount int    `json:"tokenCount"`
			}
			if err := json.Unmarshal(v, &d); err != nil || len(d) != 1 || d[0].Modality != "TEXT" {
				return fmt.Errorf("promptTokensDetails %s", v)
			}
			(*u)["promptTokensDetails.TEXT"] = d[0].TokenCount
			continue
		}
		var n int
		if err := json.Unmarshal(v, &n); err != nil {
			return fmt.Errorf("usageMetadata.%s: %w", k, err)
		}
		(*u)[k] = n
	}
	if (*u)["promptTokensDetails.TEXT"] != (*u)["promptTokenCount"] {
		return fmt.Errorf("promptTokensDetails do not match promptTokenCount in %s", b)
	}
	return nil
}

// parts returns the chunk's parts (of its one candidate).
func (c gemChunk) parts(t *testing.T) []gemPart {
	t.Helper()
	if len(c.Candidates) != 1 {
		t.Fatalf("%d candidates", len(c.Candidates))
	}
	return c.Candidates[0].Content.Parts
}

// gemPost posts body to path with a Gemini key header.
func gemPost(t *testing.T, ts *httptest.Server, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-goog-api-key", "AIza-sim")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// gemBody is a one-turn request; extra members go after contents.
func gemBody(extra string) string {
	b := `{"contents":[{"role":"user","parts":[{"text":"Say hi, then <stop> & go."}]}]`
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

const (
	withThoughts = `"generationConfig":{"thinkingConfig":{"includeThoughts":true}}`
	forceCall    = `"tools":[{"functionDeclarations":[{"name":"lookup","parameters":{"type":"object"}}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}`
)

// readGemSSE splits an alt=sse body into its chunks, checking Gemini's
// framing: every event is exactly `data: <json>\r\n\r\n`, and there is
// no [DONE]. err is the read error (nil on a clean end).
func readGemSSE(t *testing.T, body io.Reader) ([]gemChunk, error) {
	t.Helper()
	raw, err := io.ReadAll(body)
	var out []gemChunk
	rest := raw
	for len(rest) > 0 {
		ev, after, ok := bytes.Cut(rest, []byte("\r\n\r\n"))
		if !ok {
			if err == nil {
				t.Fatalf("unterminated event %q", rest)
			}
			break // cut by a drop
		}
		data, found := bytes.CutPrefix(ev, []byte("data: "))
		if !found || bytes.ContainsAny(data, "\r\n") {
			t.Fatalf("event %q is not one data line", ev)
		}
		if string(data) == "[DONE]" {
			t.Fatal("Gemini streams have no [DONE]")
		}
		var c gemChunk
		if e := json.Unmarshal(data, &c); e != nil {
			t.Fatalf("chunk %q: %v", data, e)
		}
		out = append(out, c)
		rest = after
	}
	return out, err
}

// readGemArray decodes a streamed JSON array body, checking Google's
// separators.
func readGemArray(t *testing.T, body io.Reader) []gemChunk {
	t.Helper()
	raw, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.HasPrefix(raw, []byte("[{")) || !bytes.HasSuffix(raw, []byte("}\n]")) {
		t.Fatalf("not a streamed array: %q", raw)
	}
	if n := bytes.Count(raw, []byte("\n,\r\n{")); n == 0 {
		t.Errorf("no `\\n,\\r\\n` separators in %q", raw)
	}
	var out []gemChunk
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("array %q: %v", raw, err)
	}
	return out
}

// gemAnswer is a stream reassembled.
type gemAnswer struct {
	thoughts, text string
	signatures     []string // of the parts that carry one, in order
	signedFirst    bool     // the first non-thought part is signed
	calls          []gemPart
	finish         string
	usage          map[string]int
}

func reassembleGem(t *testing.T, chunks []gemChunk) gemAnswer {
	t.Helper()
	var a gemAnswer
	seenAnswer := false
	prevTotal := 0
	for i, c := range chunks {
		if c.Error != nil {
			t.Fatalf("chunk %d is an error: %+v", i, c.Error)
		}
		if c.ModelVersion == "" || c.ResponseID == "" {
			t.Errorf("chunk %d lacks modelVersion or responseId", i)
		}
		u := c.UsageMetadata
		if u["promptTokenCount"] == 0 || u["totalTokenCount"] < prevTotal {
			t.Errorf("chunk %d usage %v after total %d: not cumulative", i, u, prevTotal)
		}
		if u["totalTokenCount"] != u["promptTokenCount"]+u["candidatesTokenCount"]+u["thoughtsTokenCount"] {
			t.Errorf("chunk %d usage %v does not add up", i, u)
		}
		prevTotal = u["totalTokenCount"]
		if f := c.Candidates[0].FinishReason; f != "" {
			if i != len(chunks)-1 {
				t.Errorf("finishReason %s on chunk %d of %d", f, i, len(chunks))
			}
			a.finish, a.usage = f, u
		}
		for _, p := range c.parts(t) {
			if p.ThoughtSignature != "" {
				a.signatures = append(a.signatures, p.ThoughtSignature)
			}
			switch {
			case p.Thought:
				if seenAnswer {
					t.Error("a thought after the answer started")
				}
				if p.ThoughtSignature != "" {
					t.Error("a signed thought part")
				}
				a.thoughts += *p.Text
			case p.FunctionCall != nil:
				a.signedFirst = a.signedFirst || !seenAnswer && p.ThoughtSignature != ""
				seenAnswer = true
				a.calls = append(a.calls, p)
			case p.Text != nil:
				a.signedFirst = a.signedFirst || !seenAnswer && p.ThoughtSignature != ""
				seenAnswer = true
				a.text += *p.Text
			default:
				t.Errorf("empty part in chunk %d", i)
			}
		}
	}
	return a
}

func TestGeminiStreamSSE(t *testing.T) {
	wantR, wantC := Texts(gemCfg)
	sig := Signature(gemCfg)
	for _, tc := range []struct {
		name, extra  string
		wantThoughts bool
		thinks       bool
	}{
		{"include thoughts", withThoughts, true, true},
		{"hidden thoughts", `"generationConfig":{"temperature":0.2}`, false, true},
		{"budget 0", `"generationConfig":{"thinkingConfig":{"includeThoughts":true,"thinkingBudget":0}}`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := startServer(t, gemCfg)
			resp := gemPost(t, ts, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", gemBody(tc.extra))
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			chunks, err := readGemSSE(t, resp.Body)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			a := reassembleGem(t, chunks)
			if a.text != strings.Join(wantC, "") {
				t.Errorf("text %q, want %q", a.text, strings.Join(wantC, ""))
			}
			wantThoughts := ""
			if tc.wantThoughts {
				wantThoughts = strings.Join(wantR, "")
			}
			if a.thoughts != wantThoughts {
				t.Errorf("thoughts %q, want %q", a.thoughts, wantThoughts)
			}
			wantChunks := len(wantC) + 1
			if tc.wantThoughts {
				wantChunks += len(wantR)
			}
			if len(chunks) != wantChunks {
				t.Errorf("%d chunks, want %d (one per piece, then the finish)", len(chunks), wantChunks)
			}
			if a.finish != geminiStop || chunks[0].ModelVersion != "gemini-2.5-flash" {
				t.Errorf("finish %q, modelVersion %q", a.finish, chunks[0].ModelVersion)
			}
			thoughtTokens := 0
			if tc.thinks {
				thoughtTokens = len(wantR)
				if !slices.Equal(a.signatures, []string{sig}) || !a.signedFirst {
					t.Errorf("signatures %q (first answer part signed: %v), want one, %q, on the first", a.signatures, a.signedFirst, sig)
				}
			} else if len(a.signatures) != 0 {
				t.Errorf("signatures %q without thinking", a.signatures)
			}
			if a.usage["candidatesTokenCount"] != len(wantC) || a.usage["thoughtsTokenCount"] != thoughtTokens {
				t.Errorf("final usage %v, want %d candidates and %d thoughts tokens", a.usage, len(wantC), thoughtTokens)
			}
		})
	}
}

// The JSON-array stream (no alt=sse) carries the same chunks as SSE.
func TestGeminiStreamArray(t *testing.T) {
	_, ts := startServer(t, gemCfg)
	sseChunks, err := readGemSSE(t, gemPost(t, ts, "/v1/models/m:streamGenerateContent?alt=sse", gemBody(withThoughts)).Body)
	if err != nil {
		t.Fatal(err)
	}
	resp := gemPost(t, ts, "/v1/models/m:streamGenerateContent", gemBody(withThoughts))
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	arr := readGemArray(t, resp.Body)
	a, b := reassembleGem(t, arr), reassembleGem(t, sseChunks)
	if len(arr) != len(sseChunks) || a.text != b.text || a.thoughts != b.thoughts || a.finish != b.finish || !slices.Equal(a.signatures, b.signatures) {
		t.Errorf("array %d chunks %+v, SSE %d chunks %+v", len(arr), a, len(sseChunks), b)
	}
}

func TestGeminiGenerateContent(t *testing.T) {
	wantR, wantC := Texts(gemCfg)
	_, ts := startServer(t, gemCfg)
	for _, path := range []string{"/v1beta/models/gemini-2.5-pro:generateContent", "/v1/models/gemini-2.5-pro:generateContent?key=AIza-sim"} {
		var c gemChunk
		resp := gemPost(t, ts, path, gemBody(withThoughts))
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
		}
		ps := c.parts(t)
		if len(ps) != 2 || !ps[0].Thought || *ps[0].Text != strings.Join(wantR, "") || ps[1].Thought || *ps[1].Text != strings.Join(wantC, "") {
			t.Fatalf("%s: parts %+v", path, ps)
		}
		if ps[0].ThoughtSignature != "" || ps[1].ThoughtSignature != Signature(gemCfg) {
			t.Errorf("signatures %q, %q: want only the text part signed", ps[0].ThoughtSignature, ps[1].ThoughtSignature)
		}
		u := c.UsageMetadata
		if c.Candidates[0].FinishReason != geminiStop || c.Candidates[0].Content.Role != "model" || u["thoughtsTokenCount"] != len(wantR) || u["candidatesTokenCount"] != len(wantC) || u["cachedContentTokenCount"] != 0 {
			t.Errorf("%s: finish %q, role %q, usage %v", path, c.Candidates[0].FinishReason, c.Candidates[0].Content.Role, u)
		}
	}

	// The text reaches the client escaped as Google escapes it.
	_, long := startServer(t, Config{Seed: 11, ReasoningTokens: new(0), ContentTokens: new(300)})
	resp := gemPost(t, long, "/v1beta/models/m:generateContent", gemBody(""))
	raw, _ := io.ReadAll(resp.Body)
	var c gemChunk
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if text := *c.parts(t)[0].Text; !strings.ContainsAny(text, "<>&") {
		t.Fatalf("the text has none of <, > and &; pick a longer one")
	}
	if bytes.ContainsAny(raw, "<>&") {
		t.Errorf("<, > or & not escaped in %q", raw)
	}
}

// A cached prompt reports cachedContentTokenCount; maxOutputTokens cuts
// thoughts and text and finishes MAX_TOKENS.
func TestGeminiCachedAndMaxTokens(t *testing.T) {
	wantR, wantC := Texts(gemCfg)
	_, ts := startServer(t, gemCfg)
	var c gemChunk
	resp := gemPost(t, ts, "/v1beta/models/m:generateContent", gemBody(`"cachedContent":"cachedContents/abc"`))
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	if u := c.UsageMetadata; u["cachedContentTokenCount"] != u["promptTokenCount"]/2 || u["promptTokenCount"] < 2 {
		t.Errorf("usage %v: want half the prompt cached", u)
	}

	budget := len(wantR) + 2
	resp = gemPost(t, ts, "/v1beta/models/m:streamGenerateContent?alt=sse",
		gemBody(`"generationConfig":{"maxOutputTokens":`+itoa(budget)+`,"thinkingConfig":{"includeThoughts":true}}`))
	chunks, err := readGemSSE(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := reassembleGem(t, chunks)
	if a.finish != geminiMaxTokens || a.text != strings.Join(wantC[:2], "") || a.thoughts != strings.Join(wantR, "") {
		t.Errorf("finish %q, text %q, thoughts %q", a.finish, a.text, a.thoughts)
	}
	if a.usage["candidatesTokenCount"]+a.usage["thoughtsTokenCount"] != budget {
		t.Errorf("usage %v, want %d output tokens", a.usage, budget)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// A forced call (mode ANY) gets one functionCall part with id, name and
// the fixed args, signed; after a functionResponse the model answers.
func TestGeminiFunctionCall(t *testing.T) {
	_, wantC := Texts(gemCfg)
	sig := Signature(gemCfg)
	_, ts := startServer(t, gemCfg)
	checkCall := func(t *testing.T, a gemAnswer, name string) {
		t.Helper()
		if len(a.calls) != 1 {
			t.Fatalf("%d calls, text %q", len(a.calls), a.text)
		}
		fc := a.calls[0].FunctionCall
		if fc.Name != name || fc.ID == "" || string(fc.Args) != ToolInput || a.calls[0].ThoughtSignature != sig || !a.signedFirst || a.text != "" {
			t.Errorf("call %+v (signature %q), text %q", fc, a.calls[0].ThoughtSignature, a.text)
		}
		if a.finish != geminiStop || a.usage["candidatesTokenCount"] != len(ToolInputFragments) {
			t.Errorf("finish %q, usage %v", a.finish, a.usage)
		}
	}
	t.Run("stream", func(t *testing.T) {
		chunks, err := readGemSSE(t, gemPost(t, ts, "/v1beta/models/m:streamGenerateContent?alt=sse", gemBody(forceCall)).Body)
		if err != nil {
			t.Fatal(err)
		}
		checkCall(t, reassembleGem(t, chunks), "lookup")
	})
	t.Run("whole", func(t *testing.T) {
		var c gemChunk
		_ = json.NewDecoder(gemPost(t, ts, "/v1beta/models/m:generateContent", gemBody(withThoughts+","+forceCall)).Body).Decode(&c)
		checkCall(t, reassembleGem(t, []gemChunk{c}), "lookup")
	})
	t.Run("allowed names", func(t *testing.T) {
		body := gemBody(`"tools":[{"functionDeclarations":[{"name":"a"},{"name":"b"}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["b"]}}`)
		chunks, _ := readGemSSE(t, gemPost(t, ts, "/v1beta/models/m:streamGenerateContent?alt=sse", body).Body)
		checkCall(t, reassembleGem(t, chunks), "b")
	})
	for name, body := range map[string]string{
		"auto": gemBody(`"tools":[{"functionDeclarations":[{"name":"lookup"}]}],"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}`),
		"after the response": `{"contents":[{"role":"user","parts":[{"text":"go"}]},` +
			`{"role":"model","parts":[{"functionCall":{"id":"call_sim_1","name":"lookup","args":{"input":"sim"}},"thoughtSignature":"` + sig + `"}]},` +
			`{"role":"user","parts":[{"functionResponse":{"id":"call_sim_1","name":"lookup","response":{"result":"ok"}}}]}],` + forceCall + `}`,
	} {
		t.Run(name, func(t *testing.T) {
			chunks, _ := readGemSSE(t, gemPost(t, ts, "/v1beta/models/m:streamGenerateContent?alt=sse", body).Body)
			if a := reassembleGem(t, chunks); len(a.calls) != 0 || a.text != strings.Join(wantC, "") {
				t.Errorf("calls %+v, text %q: want the text answer", a.calls, a.text)
			}
		})
	}
}

func TestGeminiCountTokensAndModels(t *testing.T) {
	_, ts := startServer(t, Config{Models: []string{"gemini-2.5-flash", "sim-reasoner"}})
	for _, body := range []string{gemBody(""), `{"generateContentRequest":{"model":"models/m",` + strings.TrimPrefix(gemBody(""), "{") + `}`} {
		var got struct {
			TotalTokens int `json:"totalTokens"`
		}
		resp := gemPost(t, ts, "/v1beta/models/m:countTokens", body)
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.TotalTokens != (len("Say hi, then <stop> & go.")+3)/4 {
			t.Errorf("countTokens %s: %+v %v", body, got, err)
		}
	}

	get := func(path string, header bool) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+path, nil)
		if header {
			req.Header.Set("x-goog-api-key", "AIza-sim")
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for _, tc := range []struct {
		path   string
		header bool
	}{{"/v1beta/models", false}, {"/v1/models", true}, {"/v1/models?key=k", false}} {
		var list struct {
			Models []struct {
				Name    string   `json:"name"`
				Methods []string `json:"supportedGenerationMethods"`
			} `json:"models"`
		}
		if err := json.NewDecoder(get(tc.path, tc.header).Body).Decode(&list); err != nil {
			t.Fatal(err)
		}
		if len(list.Models) != 2 || list.Models[0].Name != "models/gemini-2.5-flash" || !slices.Contains(list.Models[0].Methods, "streamGenerateContent") {
			t.Errorf("%s: %+v", tc.path, list)
		}
	}
	var one struct{ Name string }
	_ = json.NewDecoder(get("/v1beta/models/gemini-3-pro", false).Body).Decode(&one)
	if one.Name != "models/gemini-3-pro" {
		t.Errorf("one model: %+v", one)
	}
	// Without a Gemini key, /v1/models stays OpenAI's.
	var openai struct{ Object string }
	_ = json.NewDecoder(get("/v1/models", false).Body).Decode(&openai)
	if openai.Object != "list" {
		t.Errorf("/v1/models without a Gemini key: %+v", openai)
	}
	if resp := gemPost(t, ts, "/v1beta/models/m:embedContent", "{}"); resp.StatusCode != 404 {
		t.Errorf("unknown method: %d", resp.StatusCode)
	}
}

// decodeGemError reads a Google error body and checks its status.
func decodeGemError(t *testing.T, resp *http.Response, code int, status string) gemChunk {
	t.Helper()
	var c gemChunk
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != code || c.Error == nil || c.Error.Code != code || c.Error.Status != status || c.Error.Message == "" {
		t.Fatalf("status %d, body %+v: want %d %s", resp.StatusCode, c.Error, code, status)
	}
	return c
}

func TestGeminiStatusFaults(t *testing.T) {
	for _, tc := range []struct {
		fault        Fault
		code         int
		status, wait string
	}{
		{Fault{Kind: FaultStatus, Status: 429, RetryAfter: "2"}, 429, "RESOURCE_EXHAUSTED", "2s"},
		{Fault{Kind: FaultOverloaded}, 503, "UNAVAILABLE", ""},
		{Fault{Kind: FaultStatus, Status: 400}, 400, "INVALID_ARGUMENT", ""},
		{Fault{Kind: FaultStatus, Status: 500}, 500, "INTERNAL", ""},
	} {
		_, ts := startServer(t, Config{Faults: []Fault{tc.fault}})
		for _, path := range []string{"/v1beta/models/m:streamGenerateContent?alt=sse", "/v1beta/models/m:generateContent", "/v1beta/models/m:countTokens"} {
			c := decodeGemError(t, gemPost(t, ts, path, gemBody("")), tc.code, tc.status)
			if tc.wait == "" {
				if len(c.Error.Details) != 0 {
					t.Errorf("%s: details %+v", path, c.Error.Details)
				}
			} else if len(c.Error.Details) != 1 || c.Error.Details[0].Type != "type.googleapis.com/google.rpc.RetryInfo" || c.Error.Details[0].RetryDelay != tc.wait {
				t.Errorf("%s: details %+v, want RetryInfo %s", path, c.Error.Details, tc.wait)
			}
		}
	}
}

func TestGeminiStreamFaults(t *testing.T) {
	cfg := gemCfg
	stream := func(t *testing.T, f Fault, sse bool, body string) (*http.Response, *Server) {
		c := cfg
		c.Faults = []Fault{f}
		s, ts := startServer(t, c)
		path := "/v1beta/models/m:streamGenerateContent"
		if sse {
			path += "?alt=sse"
		}
		return gemPost(t, ts, path, body), s
	}
	t.Run("error after 3, SSE", func(t *testing.T) {
		resp, _ := stream(t, Fault{Kind: FaultError, After: 3}, true, gemBody(withThoughts))
		chunks, err := readGemSSE(t, resp.Body)
		if err != nil || len(chunks) != 4 {
			t.Fatalf("%d chunks, %v", len(chunks), err)
		}
		if e := chunks[3].Error; e == nil || e.Code != 500 || e.Status != "INTERNAL" {
			t.Errorf("last chunk %+v, want the in-band error", chunks[3])
		}
		reassembleGem(t, chunks[:3])
	})
	t.Run("error before end, array", func(t *testing.T) {
		resp, _ := stream(t, Fault{Kind: FaultError, BeforeEnd: true}, false, gemBody(""))
		chunks := readGemArray(t, resp.Body)
		last := chunks[len(chunks)-1]
		if last.Error == nil {
			t.Fatalf("last element %+v, want an error", last)
		}
		a := reassembleGem(t, chunks[:len(chunks)-1])
		if _, wantC := Texts(cfg); a.finish != "" || a.text != strings.Join(wantC, "") {
			t.Errorf("finish %q, text %q: want the whole text and no finish", a.finish, a.text)
		}
	})
	t.Run("drop after 2", func(t *testing.T) {
		resp, _ := stream(t, Fault{Kind: FaultDrop, After: 2}, true, gemBody(""))
		chunks, err := readGemSSE(t, resp.Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) || len(chunks) != 2 {
			t.Errorf("%d chunks, %v: want 2 then an unexpected EOF", len(chunks), err)
		}
	})
	t.Run("drop in tool_args", func(t *testing.T) {
		// Gemini sends a call whole: the cut falls after it, before the finish.
		resp, _ := stream(t, Fault{Kind: FaultDrop, In: InToolArgs}, true, gemBody(withThoughts+","+forceCall))
		chunks, err := readGemSSE(t, resp.Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("read: %v", err)
		}
		a := reassembleGem(t, chunks)
		if len(a.calls) != 1 || string(a.calls[0].FunctionCall.Args) != ToolInput || a.finish != "" {
			t.Errorf("calls %+v, finish %q", a.calls, a.finish)
		}
	})
	t.Run("drop in reasoning", func(t *testing.T) {
		resp, _ := stream(t, Fault{Kind: FaultDrop, In: InReasoning}, true, gemBody(withThoughts))
		chunks, err := readGemSSE(t, resp.Body)
		wantR, _ := Texts(cfg)
		if !errors.Is(err, io.ErrUnexpectedEOF) || len(chunks) == 0 || len(chunks) >= len(wantR) {
			t.Errorf("%d chunks, %v: want a cut inside the %d thoughts", len(chunks), err, len(wantR))
		}
	})
	t.Run("error whole", func(t *testing.T) {
		c := cfg
		c.Faults = []Fault{{Kind: FaultError}}
		_, ts := startServer(t, c)
		decodeGemError(t, gemPost(t, ts, "/v1beta/models/m:generateContent", gemBody("")), 500, "INTERNAL")
	})
}

func TestGeminiBadRequests(t *testing.T) {
	_, ts := startServer(t, gemCfg)
	decodeGemError(t, gemPost(t, ts, "/v1beta/models/m:generateContent", "{"), 400, "INVALID_ARGUMENT")
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/v1beta/models/m:generateContent", nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	decodeGemError(t, resp, 405, "FAILED_PRECONDITION")
}

func TestGeminiRoute(t *testing.T) {
	for path, want := range map[string][2]string{
		"/v1beta/models/gemini-2.5-flash:streamGenerateContent": {"gemini-2.5-flash", "streamGenerateContent"},
		"/gemini/v1/models/m:generateContent":                   {"m", "generateContent"},
		"/v1beta/tunedModels/t:countTokens":                     {"t", "countTokens"},
		"/v1/chat/completions":                                  {},
		"/v1beta/models":                                        {},
		"/v1beta/other/m:generateContent":                       {},
		"/v1beta/models/:generateContent":                       {},
	} {
		m, meth, ok := geminiRoute(path)
		if ok != (want[0] != "") || m != want[0] || meth != want[1] {
			t.Errorf("%s: %q %q %v", path, m, meth, ok)
		}
	}
}
