package sim

import (
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// The simulator's Responses wire, as the official Go SDK (openai-go,
// already a dependency of the module's end-to-end tests) decodes it.

func sdkClient(ts *httptest.Server) *responses.ResponseService {
	c := openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey("sk-sim"), option.WithMaxRetries(0))
	return &c.Responses
}

// missingRequired lists the members tagged api:"required" in the SDK
// type of v (a struct with a JSON metadata field) that the wire omitted.
func missingRequired(v any) []string {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Struct {
		return []string{"(not a type the SDK knows)"}
	}
	meta := rv.FieldByName("JSON")
	if !meta.IsValid() {
		return nil
	}
	var out []string
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		if f.Tag.Get("api") != "required" {
			continue
		}
		m := meta.FieldByName(f.Name)
		if raw, ok := m.Interface().(interface{ Raw() string }); ok && raw.Raw() == "" {
			out = append(out, f.Tag.Get("json"))
		}
	}
	return out
}

// checkEvent checks that a stream event, and the item it carries, have
// every member the SDK requires.
func checkEvent(t *testing.T, ev responses.ResponseStreamEventUnion) {
	t.Helper()
	if miss := missingRequired(ev.AsAny()); len(miss) != 0 {
		t.Errorf("%s lacks required members %v", ev.Type, miss)
	}
	if ev.Type == "response.output_item.added" || ev.Type == "response.output_item.done" {
		if miss := missingRequired(ev.Item.AsAny()); len(miss) != 0 {
			t.Errorf("%s: item %s lacks required members %v", ev.Type, ev.Item.Type, miss)
		}
	}
}

func sdkParams(reasoning bool) responses.ResponseNewParams {
	p := responses.ResponseNewParams{
		Model:        "gpt-sim",
		Instructions: openai.String("be brief"),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("hello world!")},
	}
	if reasoning {
		p.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffortLow, Summary: shared.ReasoningSummaryAuto}
	}
	return p
}

func TestResponsesSDKComplete(t *testing.T) {
	wantR, wantC := Texts(msgCfg)
	_, ts := startServer(t, msgCfg)
	resp, err := sdkClient(ts).New(t.Context(), sdkParams(true))
	if err != nil {
		t.Fatal(err)
	}
	if miss := missingRequired(*resp); len(miss) != 0 {
		t.Errorf("response lacks required members %v", miss)
	}
	if resp.OutputText() != strings.Join(wantC, "") || resp.Status != "completed" || resp.Usage.OutputTokensDetails.ReasoningTokens != int64(len(wantR)) {
		t.Errorf("text %q status %q usage %+v", resp.OutputText(), resp.Status, resp.Usage)
	}
	r := resp.Output[0].AsReasoning()
	if len(r.Summary) != 1 || r.Summary[0].Text != strings.Join(wantR, "") {
		t.Errorf("reasoning item %+v", r)
	}
	for i, item := range resp.Output {
		if miss := missingRequired(item.AsAny()); len(miss) != 0 {
			t.Errorf("output[%d] %s lacks %v", i, item.Type, miss)
		}
	}
}

func TestResponsesSDKStream(t *testing.T) {
	wantR, wantC := Texts(msgCfg)
	_, ts := startServer(t, msgCfg)
	stream := sdkClient(ts).NewStreaming(t.Context(), sdkParams(true))
	var summary, text strings.Builder
	var types []string
	var completed responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		checkEvent(t, ev)
		switch ev.Type {
		case "response.reasoning_summary_text.delta":
			summary.WriteString(ev.Delta)
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			completed = ev.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if summary.String() != strings.Join(wantR, "") || text.String() != strings.Join(wantC, "") {
		t.Errorf("summary %q text %q", summary.String(), text.String())
	}
	if completed.OutputText() != strings.Join(wantC, "") || completed.Usage.InputTokens != 5 {
		t.Errorf("completed %+v (events %q)", completed, types)
	}
}

// TestResponsesSDKRaisesInBandError checks that the SDK ends the stream
// with an error, not a clean-looking end, on the error fault.
func TestResponsesSDKRaisesInBandError(t *testing.T) {
	cfg := msgCfg
	cfg.Faults = []Fault{{Kind: FaultError, After: 2}}
	_, ts := startServer(t, cfg)
	stream := sdkClient(ts).NewStreaming(t.Context(), sdkParams(false))
	n := 0
	for stream.Next() {
		n++
	}
	var se *ssestream.StreamError
	if err := stream.Err(); !errors.As(err, &se) || !strings.Contains(err.Error(), "simulated upstream error") {
		t.Errorf("after %d events: err %v, want the SDK's stream error", n, err)
	}
	if n != 5 { // created (counted), in_progress, item added, part added, one delta (counted)
		t.Errorf("%d events before the error, want 5", n)
	}

	// A status fault is the SDK's typed API error.
	cfg.Faults = []Fault{{Kind: FaultStatus, Status: 429}}
	_, ts = startServer(t, cfg)
	_, err := sdkClient(ts).New(t.Context(), sdkParams(false))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Type != "rate_limit_error" {
		t.Errorf("err %v", err)
	}
}

func TestResponsesSDKToolRoundTrip(t *testing.T) {
	_, wantC := Texts(msgCfg)
	_, ts := startServer(t, msgCfg)
	p := sdkParams(false)
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("weather?", responses.EasyInputMessageRoleUser),
	}}
	p.Tools = []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object"}, false)}
	p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)}

	stream := sdkClient(ts).NewStreaming(t.Context(), p)
	var call responses.ResponseFunctionToolCall
	for stream.Next() {
		ev := stream.Current()
		checkEvent(t, ev)
		if ev.Type == "response.output_item.done" && ev.Item.Type == "function_call" {
			call = ev.Item.AsFunctionCall()
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if call.Name != "get_weather" || call.Arguments != ToolInput || call.CallID != "call_sim_1" {
		t.Fatalf("call %+v", call)
	}

	out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny")
	out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	p.Input.OfInputItemList = append(p.Input.OfInputItemList,
		responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name), out)
	resp, err := sdkClient(ts).New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != strings.Join(wantC, "") {
		t.Errorf("answer after the output %q", resp.OutputText())
	}
}
