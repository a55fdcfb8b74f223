package llmrelay_test

// Parallel tool calls from a Chat upstream, in every interleaving
// providers send, reach Messages and Responses clients whole, as the
// official SDKs' own accumulators put them together: the Anthropic Node
// SDK's messages.stream().finalMessage(), the openai Node SDK's
// responses.stream().finalResponse() (e2e/node/toolcalls.mjs), and the Go
// SDKs (anthropic-sdk-go's Message.Accumulate, openai-go's completed
// response); streaming and not.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// sdkCall is one tool call as a client got it: its id, name, and
// arguments (a Messages input as compact JSON, a Responses arguments
// string as it came).
type sdkCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Args string `json:"args"`
}

// toolScenario is one way a Chat provider streams the same calls.
type toolScenario struct {
	chunks []string // the stream's data, after the role chunk
	calls  []sdkCall
	text   string
}

var (
	callWeather = sdkCall{"call_w", "get_weather", `{"city":"Paris","days":3}`}
	callTime    = sdkCall{"call_t", "get_time", `{"tz":"Europe/Paris"}`}
	callNow     = sdkCall{"call_n", "now", `{}`}
)

// tcFrag is a tool call fragment chunk: index < 0 leaves the index out,
// id and name "" leave them out.
func tcFrag(index int, id, name, args string) string {
	var f []string
	if index >= 0 {
		f = append(f, fmt.Sprintf(`"index":%d`, index))
	}
	if id != "" {
		f = append(f, `"id":"`+id+`","type":"function"`)
	}
	fn := `"arguments":` + jsonStr(args)
	if name != "" {
		fn = `"name":"` + name + `",` + fn
	}
	f = append(f, `"function":{`+fn+`}`)
	return `{"id":"chatcmpl-tc","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{` + strings.Join(f, ",") + `}]},"finish_reason":null}]}`
}

func jsonStr(s string) string { b, _ := json.Marshal(s); return string(b) }

var toolScenarios = map[string]toolScenario{
	"tc-sequential": {chunks: []string{
		tcFrag(0, "call_w", "get_weather", `{"city":`), tcFrag(0, "", "", `"Paris","days":3}`),
		tcFrag(1, "call_t", "get_time", `{"tz":`), tcFrag(1, "", "", `"Europe/Paris"}`),
	}, calls: []sdkCall{callWeather, callTime}},
	"tc-interleaved": {chunks: []string{
		tcFrag(0, "call_w", "get_weather", ""), tcFrag(1, "call_t", "get_time", ""),
		tcFrag(1, "", "", `{"tz":`), tcFrag(0, "", "", `{"city":"Paris",`),
		tcFrag(1, "", "", `"Europe/Paris"}`), tcFrag(0, "", "", `"days":3}`),
	}, calls: []sdkCall{callWeather, callTime}},
	"tc-noindex": {chunks: []string{
		tcFrag(-1, "call_w", "get_weather", `{"city":"Paris",`), tcFrag(-1, "", "", `"days":3}`),
		tcFrag(-1, "call_t", "get_time", `{"tz":"Europe/Paris"}`),
	}, calls: []sdkCall{callWeather, callTime}},
	"tc-textbetween": {chunks: []string{
		tcFrag(0, "call_w", "get_weather", `{"city":"Par`),
		chunk("Let me check "), chunk("both."),
		tcFrag(0, "", "", `is","days":3}`), tcFrag(1, "call_t", "get_time", `{"tz":"Europe/Paris"}`),
	}, calls: []sdkCall{callWeather, callTime}, text: "Let me check both."},
	"tc-noargs": {chunks: []string{
		tcFrag(0, "call_n", "now", ""), tcFrag(1, "call_w", "get_weather", `{"city":"Paris","days":3}`),
	}, calls: []sdkCall{callNow, callWeather}},
}

func TestToolCallsOfficialSDKs(t *testing.T) {
	var up *fakeUpstream
	up = newFakeUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		body := up.requests()[n-1].body
		model, _ := body["model"].(string)
		sc, ok := toolScenarios[model]
		if !ok {
			answerJSON(w, http.StatusNotFound, `{"error":{"message":"no such model","type":"invalid_request_error"}}`)
			return
		}
		if stream, _ := body["stream"].(bool); stream {
			datas := append([]string{`{"id":"chatcmpl-tc","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`}, sc.chunks...)
			datas = append(datas, `{"id":"chatcmpl-tc","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
				`{"id":"chatcmpl-tc","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":12,"total_tokens":32}}`, "[DONE]")
			streamEvents(w, 0, datas...)
			return
		}
		// The same answer whole; the call without arguments has "".
		var calls []string
		for _, c := range sc.calls {
			args := c.Args
			if c.Name == "now" {
				args = ""
			}
			calls = append(calls, `{"id":"`+c.ID+`","type":"function","function":{"name":"`+c.Name+`","arguments":`+jsonStr(args)+`}}`)
		}
		content := "null"
		if sc.text != "" {
			content = jsonStr(sc.text)
		}
		answerJSON(w, http.StatusOK, `{"id":"chatcmpl-tc","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":`+content+
			`,"tool_calls":[`+strings.Join(calls, ",")+`]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":12,"total_tokens":32}}`)
	})
	var models strings.Builder
	for name := range toolScenarios {
		models.WriteString("model " + name + " {\n\t\t\tto tools\n\t\t}\n\t\t")
	}
	startRelay(t, `llm_relay {
		key `+sdkKey+`
		upstream tools `+up.v1()+` {
			api chat
		}
		`+models.String()+`
	}`)

	check := func(t *testing.T, who string, got []sdkCall, text string, sc toolScenario) {
		t.Helper()
		if !slices.Equal(got, sc.calls) || text != sc.text {
			t.Errorf("%s: calls %+v text %q\n want %+v text %q", who, got, text, sc.calls, sc.text)
		}
	}
	node, nodeErr := exec.LookPath("node")
	haveNode := nodeErr == nil && nodeModule("@anthropic-ai/sdk") && nodeModule("openai")
	for name, sc := range toolScenarios {
		t.Run(name, func(t *testing.T) {
			for _, mode := range []string{"stream", "create"} {
				stream := mode == "stream"
				// anthropic-sdk-go: Message.Accumulate, or New.
				m, err := sendMessage(anthropicClient(relayBase, sdkKey), stream, anthropic.MessageNewParams{
					Model: anthropic.Model(name), MaxTokens: 1024,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather and time in Paris?"))},
					Tools:    []anthropic.ToolUnionParam{weatherTool},
				})
				if err != nil {
					t.Fatalf("anthropic-sdk-go %s: %v", mode, err)
				}
				var calls []sdkCall
				var text string
				for _, b := range m.Content {
					switch b.Type {
					case "tool_use":
						calls = append(calls, sdkCall{b.ID, b.Name, compact(t, b.Input)})
					case "text":
						text += b.Text
					}
				}
				if m.StopReason != "tool_use" {
					t.Errorf("anthropic-sdk-go %s: stop reason %q", mode, m.StopReason)
				}
				check(t, "anthropic-sdk-go "+mode, calls, text, sc)

				// openai-go: the completed response, or New.
				calls, text = openaiGoCalls(t, name, stream)
				check(t, "openai-go "+mode, calls, text, sc)

				if !haveNode {
					continue
				}
				for _, api := range []string{"messages", "responses"} {
					res := runToolcallsNode(t, node, name, api, mode)
					if res.Error != nil {
						t.Errorf("node %s %s: %+v", api, mode, res.Error)
						continue
					}
					want := map[string]string{"messages": "tool_use", "responses": "completed"}[api]
					if res.Stop != want {
						t.Errorf("node %s %s: stop %q, want %q", api, mode, res.Stop, want)
					}
					check(t, "node "+api+" "+mode, res.Calls, res.Text, sc)
				}
			}
		})
	}
	if !haveNode {
		t.Log("node or e2e/node/node_modules missing: the Node SDKs were skipped (run npm ci in e2e/node)")
	}
}

// compact is raw JSON without insignificant space, as JSON.stringify
// writes it.
func compact(t *testing.T, raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("input %s: %v", raw, err)
	}
	return b.String()
}

// openaiGoCalls sends the Responses request with openai-go and returns
// the function calls and text of the final response: the completed event's
// when streaming, checked against the items the output_item.done events
// gave (what Codex CLI reads).
func openaiGoCalls(t *testing.T, model string, stream bool) ([]sdkCall, string) {
	t.Helper()
	client := openai.NewClient(option.WithBaseURL(relayBase+"/v1"), option.WithAPIKey(sdkKey), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	params := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather and time in Paris?")}}
	var resp responses.Response
	var done []sdkCall
	if stream {
		s := client.Responses.NewStreaming(ctx, params)
		defer s.Close()
		for s.Next() {
			switch ev := s.Current(); ev.Type {
			case "response.output_item.done":
				if ev.Item.Type == "function_call" {
					done = append(done, sdkCall{ev.Item.CallID, ev.Item.Name, ev.Item.Arguments.OfString})
				}
			case "response.completed":
				resp = ev.Response
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("openai-go stream: %v", err)
		}
	} else {
		r, err := client.Responses.New(ctx, params)
		if err != nil {
			t.Fatalf("openai-go New: %v", err)
		}
		resp = *r
	}
	var calls []sdkCall
	for _, it := range resp.Output {
		if it.Type == "function_call" {
			calls = append(calls, sdkCall{it.CallID, it.Name, it.Arguments.OfString})
		}
	}
	if stream && !slices.Equal(done, calls) {
		t.Errorf("openai-go stream: output_item.done calls %+v, the completed response's %+v", done, calls)
	}
	if resp.Status != "completed" {
		t.Errorf("openai-go: status %q", resp.Status)
	}
	return calls, resp.OutputText()
}

// toolcallsNodeResult is the JSON line e2e/node/toolcalls.mjs prints.
type toolcallsNodeResult struct {
	Text  string    `json:"text"`
	Stop  string    `json:"stop"`
	Calls []sdkCall `json:"calls"`
	Error *struct {
		Name    string `json:"name"`
		Message string `json:"message"`
	} `json:"error"`
}

func runToolcallsNode(t *testing.T, node, model, api, mode string) toolcallsNodeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("e2e", "node", "toolcalls.mjs"), relayBase, sdkKey, model, api, mode)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := errors.AsType[*exec.ExitError](err); err != nil && !ok {
		t.Fatalf("node %s %s: %v\nstderr: %s", api, mode, err, stderr.String())
	}
	var res toolcallsNodeResult
	if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); jerr != nil {
		t.Fatalf("node %s %s (%v): output is not one JSON line: %v\nstdout: %s\nstderr: %s", api, mode, err, jerr, stdout.String(), stderr.String())
	}
	return res
}

// nodeModule reports whether e2e/node/node_modules has the package.
func nodeModule(pkg string) bool {
	_, err := os.Stat(filepath.Join("e2e", "node", "node_modules", pkg, "package.json"))
	return err == nil
}
