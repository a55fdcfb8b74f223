package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// respTail is what every response repeats when the request is not given.
const respTail = `"background":false,"error":null,"instructions":null,"max_output_tokens":null,
	"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":false,
	"temperature":null,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":null,
	"truncation":"disabled","user":null,"metadata":{}`

const usageChat = `"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30,
	"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":7}}`

const usageResp = `"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":20,
	"output_tokens_details":{"reasoning_tokens":7},"total_tokens":30}`

func completion(message, finish, usage string) string {
	s := `{"id":"chatcmpl-abc","object":"chat.completion","created":1700000000,"model":"m1",
		"choices":[{"index":0,"message":` + message + `,"finish_reason":"` + finish + `"}]`
	if usage != "" {
		s += "," + usage
	}
	return s + "}"
}

func response(status, incomplete, output, usage string) string {
	s := `{"id":"resp_abc","object":"response","created_at":1700000000,"status":"` + status + `",
		"incomplete_details":` + incomplete + `,"model":"m1","output":[` + output + `],` + respTail
	if usage != "" {
		s += "," + usage
	}
	return s + "}"
}

const (
	msgHello = `{"type":"message","id":"msg_abc","status":"completed","role":"assistant",
		"content":[{"type":"output_text","text":"Hello","annotations":[],"logprobs":[]}]}`
	rsHmm = `{"type":"reasoning","id":"rs_abc","summary":[{"type":"summary_text","text":"hmm"}]}`
)

func TestFromChatResponse(t *testing.T) {
	cases := []struct {
		name, in string
		opt      chat.Options
		want     string
	}{
		{"text and usage", completion(`{"role":"assistant","content":"Hello"}`, "stop", usageChat), chat.Options{},
			response("completed", "null", msgHello, usageResp)},
		{"no usage", completion(`{"role":"assistant","content":"Hello"}`, "stop", ""), chat.Options{},
			response("completed", "null", msgHello, "")},
		{"reasoning_content", completion(`{"role":"assistant","content":"Hello","reasoning_content":"hmm"}`, "stop", ""), chat.Options{},
			response("completed", "null", rsHmm+","+msgHello, "")},
		{"reasoning (OpenRouter)", completion(`{"role":"assistant","content":"Hello","reasoning":"hmm"}`, "stop", ""), chat.Options{},
			response("completed", "null", rsHmm+","+msgHello, "")},
		{"tool calls, no text", completion(`{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},
			{"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]}`, "tool_calls", ""), chat.Options{},
			response("completed", "null", `{"type":"function_call","id":"fc_abc_0","call_id":"call_1","name":"f","arguments":"{\"a\":1}","status":"completed"},
			{"type":"function_call","id":"fc_abc_1","call_id":"call_2","name":"g","arguments":"{}","status":"completed"}`, "")},
		{"tool call without id", completion(`{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}`, "tool_calls", ""), chat.Options{},
			response("completed", "null", `{"type":"function_call","id":"fc_abc_0","call_id":"call_abc_0","name":"f","arguments":"{}","status":"completed"}`, "")},
		{"length", completion(`{"role":"assistant","content":"Hello"}`, "length", ""), chat.Options{},
			response("incomplete", `{"reason":"max_output_tokens"}`, msgHello, "")},
		{"content_filter", completion(`{"role":"assistant","content":"Hello"}`, "content_filter", ""), chat.Options{},
			response("incomplete", `{"reason":"content_filter"}`, msgHello, "")},
		{"empty", completion(`{"role":"assistant","content":""}`, "stop", ""), chat.Options{},
			response("completed", "null", "", "")},
		{"created from opt", completion(`{"role":"assistant","content":"Hello"}`, "stop", ""), chat.Options{Created: 1800000000},
			strings.Replace(response("completed", "null", msgHello, ""), "1700000000", "1800000000", 1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := FromChatResponse([]byte(c.in), c.opt)
			if err != nil {
				t.Fatal(err)
			}
			jsonEq(t, got, c.want)
		})
	}
}

func TestFromChatResponseEchoesRequest(t *testing.T) {
	req := `{"model":"m1","input":"x","instructions":"be brief","max_output_tokens":50,"parallel_tool_calls":false,
		"reasoning":{"effort":"low","summary":"auto"},"temperature":0.2,"top_p":0.5,"tool_choice":"required",
		"tools":[{"type":"function","name":"f","parameters":{}}],"text":{"format":{"type":"json_object"}},"user":"u","metadata":{"k":"v"}}`
	got, err := FromChatResponse([]byte(completion(`{"content":"Hello"}`, "stop", "")), chat.Options{Request: []byte(req)})
	if err != nil {
		t.Fatal(err)
	}
	var o map[string]json.RawMessage
	if err := json.Unmarshal(got, &o); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"instructions": `"be brief"`, "max_output_tokens": "50", "parallel_tool_calls": "false",
		"reasoning": `{"effort":"low","summary":"auto"}`, "temperature": "0.2", "top_p": "0.5", "tool_choice": `"required"`,
		"tools": `[{"type":"function","name":"f","parameters":{}}]`, "text": `{"format":{"type":"json_object"}}`,
		"user": `"u"`, "metadata": `{"k":"v"}`} {
		jsonEq(t, o[k], want)
	}
}

func TestFromChatResponseNotJSON(t *testing.T) {
	if _, err := FromChatResponse([]byte(`<html>`), chat.Options{}); err == nil {
		t.Fatal("no error for a body that is not JSON")
	}
}

func TestFromChatError(t *testing.T) {
	valid := `{"error":{"message":"bad","type":"invalid_request_error","param":"model","code":null}}`
	st, body := FromChatError(400, []byte(valid))
	if st != 400 || string(body) != valid {
		t.Errorf("valid body changed: %d %s", st, body)
	}
	cases := []struct {
		status    int
		in        string
		msg, kind string
	}{
		{502, `<html>bad gateway</html>`, `<html>bad gateway</html>`, "server_error"},
		{429, ``, `upstream answered 429 with no body`, "rate_limit_error"},
		{400, `{"detail":"x"}`, `{"detail":"x"}`, "invalid_request_error"},
		{401, `{"error":"nope"}`, `{"error":"nope"}`, "authentication_error"},
	}
	for _, c := range cases {
		st, body := FromChatError(c.status, []byte(c.in))
		if st != c.status {
			t.Errorf("status %d, want %d", st, c.status)
		}
		var e struct {
			Error struct{ Message, Type string } `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Error.Message != c.msg || e.Error.Type != c.kind {
			t.Errorf("%q → %s (err %v), want message %q type %q", c.in, body, err, c.msg, c.kind)
		}
	}
}

// A client sends the output items back as the next request's input (Codex
// does): they must translate to the assistant turn they came from.
func TestOutputItemsRoundTrip(t *testing.T) {
	out, err := FromChatResponse([]byte(completion(`{"role":"assistant","content":"Hello","reasoning_content":"hmm","tool_calls":[
		{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}`, "tool_calls", "")), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Output []json.RawMessage }
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	input, _ := json.Marshal(append(r.Output, json.RawMessage(`{"type":"function_call_output","call_id":"call_1","output":"42"}`)))
	req, err := ToChatRequest([]byte(`{"model":"m","input":`+string(input)+`}`), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jsonEq(t, req, `{"model":"m","messages":[
		{"role":"assistant","content":"Hello","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"42"}]}`)
}
