package gemini

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// TestToChatRequest: every member of the table, in one request as Gemini
// CLI sends them.
func TestToChatRequest(t *testing.T) {
	in := `{
	  "contents": [
	    {"role": "user", "parts": [{"text": "Read a.txt"}, {"inlineData": {"mimeType": "image/png", "data": "iVBO"}}]},
	    {"role": "model", "parts": [{"text": "thinking…", "thought": true}, {"text": "Sure."}, {"functionCall": {"name": "read_file", "args": {"path": "a.txt", "n": [1, 2.5]}}, "thoughtSignature": "Q2lR+/=="}]},
	    {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"output": "hello <b>"}}}, {"text": "and now?"}]},
	    {"role": "model", "parts": [{"functionCall": {"id": "fc-9", "name": "ls", "args": {}}}]},
	    {"role": "user", "parts": [{"functionResponse": {"id": "fc-9", "name": "ls", "response": {"files": ["a"], "n": 1}}}]}
	  ],
	  "systemInstruction": {"parts": [{"text": "You are a CLI."}]},
	  "tools": [{"functionDeclarations": [
	    {"name": "read_file", "description": "Reads", "parametersJsonSchema": {"type": "object", "properties": {"path": {"type": "string"}}}},
	    {"name": "ls", "parameters": {"type": "OBJECT", "properties": {"dir": {"type": "STRING", "enum": ["A", "B"]}}}}
	  ]}],
	  "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["ls"]}},
	  "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
	  "generationConfig": {"temperature": 0.5, "topP": 0.9, "topK": 40, "maxOutputTokens": 100, "stopSequences": ["END"],
	    "responseMimeType": "application/json", "responseSchema": {"type": "OBJECT"},
	    "thinkingConfig": {"thinkingBudget": 8192, "includeThoughts": true}}
	}`
	out, err := ToChatRequest([]byte(in), chat.Options{Model: "gemini-2.5-pro"})
	if err != nil {
		t.Fatal(err)
	}
	sig := withSignature(CallID(1, 2), "Q2lR+/==")
	want := `{"model":"gemini-2.5-pro","messages":[
	  {"role":"system","content":"You are a CLI."},
	  {"role":"user","content":[{"type":"text","text":"Read a.txt"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}]},
	  {"role":"assistant","content":"Sure.","tool_calls":[{"id":"` + sig + `","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.txt\",\"n\":[1,2.5]}"}}]},
	  {"role":"tool","content":"hello <b>","tool_call_id":"` + sig + `"},
	  {"role":"user","content":"and now?"},
	  {"role":"assistant","content":null,"tool_calls":[{"id":"fc-9","type":"function","function":{"name":"ls","arguments":"{}"}}]},
	  {"role":"tool","content":"{\"files\":[\"a\"],\"n\":1}","tool_call_id":"fc-9"}],
	  "max_tokens":100,"stop":["END"],"temperature":0.5,"top_p":0.9,
	  "response_format":{"type":"json_schema","json_schema":{"name":"response","schema":{"type":"object"}}},
	  "reasoning_effort":"medium",
	  "tools":[{"type":"function","function":{"name":"read_file","description":"Reads","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}},
	    {"type":"function","function":{"name":"ls","parameters":{"properties":{"dir":{"enum":["A","B"],"type":"string"}},"type":"object"}}}],
	  "tool_choice":{"function":{"name":"ls"},"type":"function"}}`
	if !jsonEqual(string(out), want) {
		t.Fatalf("got  %s\nwant %s", out, strings.Join(strings.Fields(want), ""))
	}
}

// TestToChatStreamRequest: a stream call's request is ToChatRequest's
// with stream and its usage asked for, nothing else changed; and a body
// ToChatRequest refuses, it refuses alike.
func TestToChatStreamRequest(t *testing.T) {
	in := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":7}}`
	out, err := ToChatStreamRequest([]byte(in), chat.Options{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":7,"stream":true,"stream_options":{"include_usage":true}}`
	if !jsonEqual(string(out), want) {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	plain, _ := ToChatRequest([]byte(in), chat.Options{Model: "m"})
	if strings.Contains(string(plain), "stream") {
		t.Errorf("ToChatRequest asks for a stream: %s", plain)
	}
	bad := `{"contents":[{"role":"bot","parts":[{"text":"hi"}]}]}`
	_, e1 := ToChatRequest([]byte(bad), chat.Options{})
	_, e2 := ToChatStreamRequest([]byte(bad), chat.Options{})
	if e1 == nil || e2 == nil || e1.Error() != e2.Error() {
		t.Errorf("refusals differ: %v / %v", e1, e2)
	}
}

// TestToChatRequestPairsByName: responses without ids answer the first
// unanswered call of their name, in order, across parallel calls.
func TestToChatRequestPairsByName(t *testing.T) {
	in := `{"contents":[{"role":"user","parts":[{"text":"go"}]},
	  {"role":"model","parts":[{"functionCall":{"name":"f","args":{"i":1}}},{"functionCall":{"name":"g","args":{}}},{"functionCall":{"name":"f","args":{"i":2}}}]},
	  {"role":"user","parts":[{"functionResponse":{"name":"g","response":{"r":"g"}}},{"functionResponse":{"name":"f","response":{"r":"f1"}}},{"functionResponse":{"name":"f","response":{"r":"f2"}}}]}]}`
	out, err := ToChatRequest([]byte(in), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Messages []struct {
			ToolCallID string          `json:"tool_call_id"`
			Content    json.RawMessage `json:"content"`
			ToolCalls  []chat.ToolCall `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	calls := r.Messages[1].ToolCalls
	want := map[string]string{CallID(1, 1): `"{\"r\":\"g\"}"`, CallID(1, 0): `"{\"r\":\"f1\"}"`, CallID(1, 2): `"{\"r\":\"f2\"}"`}
	if len(calls) != 3 || calls[0].ID != CallID(1, 0) || calls[2].Function.Arguments != `{"i":2}` {
		t.Fatalf("calls %+v", calls)
	}
	for _, m := range r.Messages[2:] {
		if want[m.ToolCallID] != string(m.Content) {
			t.Fatalf("tool message %s answers %q, want %s", m.Content, m.ToolCallID, want[m.ToolCallID])
		}
		delete(want, m.ToolCallID)
	}
	if len(want) != 0 {
		t.Fatalf("unanswered: %v", want)
	}
}

// TestToChatRequestRecorded: requests the @google/genai SDK sent (a call
// with its signature and its response, no ids; a thinking config).
func TestToChatRequestRecorded(t *testing.T) {
	out, err := ToChatRequest(readFile(t, "request_function_history.json"), chat.Options{Model: "gemini-2.5-flash"})
	if err != nil {
		t.Fatal(err)
	}
	m := mustJSON(t, out)
	msgs := m["messages"].([]any)
	call := msgs[1].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
	result := msgs[2].(map[string]any)
	if result["tool_call_id"] != call["id"] || call["function"].(map[string]any)["arguments"] != `{"denominator":2,"numerator":10}` {
		t.Fatalf("call %v, result %v", call, result)
	}
	if _, sig := SplitCallID(call["id"].(string)); !strings.HasPrefix(sig, "CiQBVKhc7gVNlWrm") {
		t.Fatalf("the signature is not in the id: %v", call["id"])
	}
	if m["tool_choice"] != "auto" || len(m["tools"].([]any)) != 1 {
		t.Fatalf("tools %v %v", m["tools"], m["tool_choice"])
	}

	out, err = ToChatRequest(readFile(t, "request_thought.json"), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m := mustJSON(t, out); m["max_tokens"] != 20.0 || m["reasoning_effort"] != nil {
		t.Fatalf("%s", out)
	}
}

// TestToChatRequestRefuses: what Chat cannot carry is refused, named;
// what is not Gemini is refused as invalid.
func TestToChatRequestRefuses(t *testing.T) {
	for _, c := range []struct {
		body, param string
		invalid     bool
	}{
		{`{"contents":[{"role":"assistant","parts":[{"text":"x"}]}]}`, "contents[0].role", true},
		{`{"contents":[{"role":"user","parts":[{"fileData":{"fileUri":"gs://x"}}]}]}`, "contents[0].parts[0].fileData", false},
		{`{"contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"application/pdf","data":"AA"}}]}]}`, "contents[0].parts[0].inlineData.mimeType", false},
		{`{"contents":[],"tools":[{"googleSearch":{}}]}`, "tools[0].googleSearch", false},
		{`{"contents":[],"tools":[{"functionDeclarations":[{"description":"x"}]}]}`, "tools[0].functionDeclarations[0].name", true},
		{`{"contents":[],"generationConfig":{"candidateCount":2}}`, "generationConfig.candidateCount", false},
		{`{"contents":[],"generationConfig":{"thinkingConfig":{"thinkingLevel":"ULTRA"}}}`, "generationConfig.thinkingConfig.thinkingLevel", true},
		{`{"contents":[],"toolConfig":{"functionCallingConfig":{"mode":"SOMETIMES"}}}`, "toolConfig.functionCallingConfig.mode", true},
		{`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f","args":[1]}}]}]}`, "contents[0].parts[0].functionCall.args", true},
		{`{"contents":[],"cachedContent":"cachedContents/x"}`, "cachedContent", false},
		{`{"contents":"x"}`, "contents", true},
	} {
		_, err := ToChatRequest([]byte(c.body), chat.Options{})
		var re *chat.RequestError
		if !errors.As(err, &re) || re.Param != c.param || re.Invalid != c.invalid {
			t.Errorf("%s: %v (%+v), want param %s invalid %v", c.body, err, re, c.param, c.invalid)
		}
	}
}

// TestThinkingToChat: budget and level to effort.
func TestThinkingToChat(t *testing.T) {
	for cfg, want := range map[string]any{
		`{"thinkingBudget":0}`:       "none",
		`{"thinkingBudget":-1}`:      nil,
		`{"thinkingBudget":1024}`:    "minimal",
		`{"thinkingBudget":2000}`:    "low",
		`{"thinkingBudget":24576}`:   "high",
		`{"thinkingLevel":"LOW"}`:    "low",
		`{"thinkingLevel":"high"}`:   "high",
		`{"includeThoughts":true}`:   nil,
		`{"thinkingLevel":"MEDIUM"}`: "medium",
	} {
		out, err := ToChatRequest([]byte(`{"contents":[],"generationConfig":{"thinkingConfig":`+cfg+`}}`), chat.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := mustJSON(t, out)["reasoning_effort"]; got != want {
			t.Errorf("%s: effort %v, want %v", cfg, got, want)
		}
	}
}

// TestFromChatRequest: every member of the table.
func TestFromChatRequest(t *testing.T) {
	id := withSignature("call_1", "c2ln+/8=")
	in := `{"model":"gemini-2.5-flash","stream":true,"messages":[
	  {"role":"system","content":"Be brief."},
	  {"role":"developer","content":[{"type":"text","text":"Really."}]},
	  {"role":"user","content":[{"type":"text","text":"Look"},{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/"}}]},
	  {"role":"assistant","content":"Ok.","tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"look","arguments":"{\"at\": [1, 2]}"}},{"id":"call_2","type":"function","function":{"name":"ls","arguments":""}}]},
	  {"role":"tool","tool_call_id":"` + id + `","content":"{\"seen\":true}"},
	  {"role":"tool","tool_call_id":"call_2","content":"a.txt"}],
	  "tools":[{"type":"function","function":{"name":"look","description":"Looks","parameters":{"type":"object"}}},{"type":"function","function":{"name":"ls"}}],
	  "tool_choice":"required","parallel_tool_calls":false,
	  "max_completion_tokens":300,"stop":"END","temperature":0.2,"top_p":0.8,"seed":7,
	  "response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},
	  "reasoning_effort":"low","user":"u1"}`
	out, err := FromChatRequest([]byte(in), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"contents":[
	  {"role":"user","parts":[{"text":"Look"},{"inlineData":{"mimeType":"image/jpeg","data":"/9j/"}}]},
	  {"role":"model","parts":[{"text":"Ok."},{"thoughtSignature":"c2ln+/8=","functionCall":{"name":"look","args":{"at":[1,2]}}},{"functionCall":{"name":"ls","args":{}}}]},
	  {"role":"user","parts":[{"functionResponse":{"name":"look","response":{"seen":true}}},{"functionResponse":{"name":"ls","response":{"output":"a.txt"}}}]}],
	  "tools":[{"functionDeclarations":[{"name":"look","description":"Looks","parametersJsonSchema":{"type":"object"}},{"name":"ls","parametersJsonSchema":{"type":"object","properties":{}}}]}],
	  "toolConfig":{"functionCallingConfig":{"mode":"ANY"}},
	  "systemInstruction":{"parts":[{"text":"Be brief."},{"text":"Really."}]},
	  "generationConfig":{"stopSequences":["END"],"responseMimeType":"application/json","responseJsonSchema":{"type":"object"},
	    "maxOutputTokens":300,"temperature":0.2,"topP":0.8,"seed":7,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":2048}}}`
	if !jsonEqual(string(out), want) {
		t.Fatalf("got  %s\nwant %s", out, strings.Join(strings.Fields(want), ""))
	}
	if model, stream := ChatModel([]byte(in)); model != "gemini-2.5-flash" || !stream {
		t.Fatalf("ChatModel: %q %v", model, stream)
	}
	if p := Path("gemini-2.5-flash", StreamMethod); p != "models/gemini-2.5-flash:streamGenerateContent?alt=sse" {
		t.Fatal(p)
	}
	if p := Path("models/gemini-2.5-flash", GenerateMethod); p != "models/gemini-2.5-flash:generateContent" {
		t.Fatal(p)
	}
}

// TestFromChatRequestRefuses names what Gemini is not asked for.
func TestFromChatRequestRefuses(t *testing.T) {
	for _, c := range []struct {
		body, param string
		invalid     bool
	}{
		{`{"messages":[{"role":"tool","tool_call_id":"nope","content":"x"}]}`, "messages[0].tool_call_id", true},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`, "messages[0].content[0].image_url.url", false},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0].function.arguments", false},
		{`{"messages":[],"n":2}`, "n", false},
		{`{"messages":[],"reasoning_effort":"huge"}`, "reasoning_effort", true},
		{`{"messages":[{"role":"robot","content":"x"}]}`, "messages[0].role", true},
		{`{"messages":[],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}}`, "tool_choice.allowed_tools.mode", false},
	} {
		_, err := FromChatRequest([]byte(c.body), chat.Options{})
		var re *chat.RequestError
		if !errors.As(err, &re) || re.Param != c.param || re.Invalid != c.invalid {
			t.Errorf("%s: %v (%+v), want param %s invalid %v", c.body, err, re, c.param, c.invalid)
		}
	}
}

// TestEffortRoundTrip: an effort through Gemini's budget comes back the
// same; a budget through Chat's effort lands on a budget at least as big.
func TestEffortRoundTrip(t *testing.T) {
	for _, e := range []string{"none", "minimal", "low", "medium", "high"} {
		b, ok := BudgetForEffort(e)
		if !ok || EffortForBudget(b) != e {
			t.Errorf("%s → %d → %s", e, b, EffortForBudget(b))
		}
	}
	for _, b := range []int{1, 500, 1024, 1025, 5000, 8192, 9000, 32768} {
		if got, _ := BudgetForEffort(EffortForBudget(b)); got < min(b, BudgetHigh) {
			t.Errorf("%d → %s → %d", b, EffortForBudget(b), got)
		}
	}
}

// TestRequestRoundTrip: a Gemini request through Chat and back keeps its
// turns, its calls' args and signatures, and pairs each response with
// its call.
func TestRequestRoundTrip(t *testing.T) {
	for _, name := range []string{"request_function_history.json", "request_thought.json"} {
		in := readFile(t, name)
		c, err := ToChatRequest(in, chat.Options{Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		back, err := FromChatRequest(c, chat.Options{})
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, c)
		}
		var a, b generateRequest
		if err := json.Unmarshal(in, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(back, &b); err != nil {
			t.Fatal(err)
		}
		if len(a.Contents) != len(b.Contents) {
			t.Fatalf("%s: %d contents, want %d\n%s", name, len(b.Contents), len(a.Contents), back)
		}
		for i := range a.Contents {
			pa, pb := a.Contents[i].Parts, b.Contents[i].Parts
			if a.Contents[i].Role != b.Contents[i].Role || len(pa) != len(pb) {
				t.Fatalf("%s: content %d: %+v, want %+v", name, i, b.Contents[i], a.Contents[i])
			}
			for j := range pa {
				ga, _ := json.Marshal(pa[j])
				gb, _ := json.Marshal(pb[j])
				if !jsonEqual(string(ga), string(gb)) {
					t.Fatalf("%s: part %d.%d: %s, want %s", name, i, j, gb, ga)
				}
			}
		}
	}
}

// TestToChatRequestCLIIDs: Gemini CLI answers a call Gemini sent without
// an id with an id it made up; the response still answers that call.
func TestToChatRequestCLIIDs(t *testing.T) {
	in := `{"contents":[{"role":"user","parts":[{"text":"go"}]},
	  {"role":"model","parts":[{"functionCall":{"name":"read_file","args":{"path":"a"}}},{"functionCall":{"name":"read_file","args":{"path":"b"}}}]},
	  {"role":"user","parts":[{"functionResponse":{"id":"read_file-1712000000000-0.1","name":"read_file","response":{"output":"A"}}},{"functionResponse":{"id":"read_file-1712000000000-0.2","name":"read_file","response":{"output":"B"}}}]}]}`
	out, err := ToChatRequest([]byte(in), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	msgs := mustJSON(t, out)["messages"].([]any)
	a, b := msgs[2].(map[string]any), msgs[3].(map[string]any)
	if a["tool_call_id"] != CallID(1, 0) || a["content"] != "A" || b["tool_call_id"] != CallID(1, 1) || b["content"] != "B" {
		t.Fatalf("%s", out)
	}
}

// TestStripSignatures: a history whose call ids carry signatures loses
// them, the pairs still matching and every id short; a body without
// one is left as it is, byte for byte.
func TestStripSignatures(t *testing.T) {
	out, err := ToChatRequest(readFile(t, "request_function_history.json"), chat.Options{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), sigSep) {
		t.Fatal("the recorded history has no signature to strip")
	}
	s := StripSignatures(out)
	var r struct {
		Messages []struct {
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []chat.ToolCall `json:"tool_calls"`
			Content    any             `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(s, &r); err != nil {
		t.Fatal(err)
	}
	call, result := r.Messages[1].ToolCalls[0], r.Messages[2]
	if call.ID != CallID(1, 0) || result.ToolCallID != call.ID || call.Function.Arguments != `{"denominator":2,"numerator":10}` || len(call.ID) > 40 {
		t.Fatalf("%s", s)
	}
	plain := []byte(`{"model":"m", "messages":[{"role":"user","content":"hi"}]}`)
	if got := StripSignatures(plain); string(got) != string(plain) {
		t.Fatalf("%s", got)
	}
}
