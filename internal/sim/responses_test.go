package sim

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// respCases are the ways a request may ask for reasoning, or not.
var respCases = []struct {
	name, reasoning string
	want            bool
}{
	{"effort high", `"reasoning":{"effort":"high","summary":"auto"},`, true},
	{"summary only", `"reasoning":{"summary":"detailed"},`, true},
	{"empty", `"reasoning":{},`, true},
	{"effort none", `"reasoning":{"effort":"none"},`, false},
	{"null", `"reasoning":null,`, false},
	{"absent", ``, false},
}

func TestResponsesCompleteMatchesChat(t *testing.T) {
	wantR, wantC := Texts(msgCfg)
	for _, tc := range respCases {
		t.Run(tc.name, func(t *testing.T) {
			s, ts := startServer(t, msgCfg)
			o := decodeRespObj(t, postTo(t, ts, "/openai/v1/responses", respBody(tc.reasoning)))
			if o.ID != "resp_sim_1" || o.Object != "response" || o.Status != "completed" || o.Model != "gpt-sim" || o.CreatedAt == 0 {
				t.Errorf("head %+v", o)
			}
			chatEvents, err := readEvents(mustPost(t, ts, streamBody).Body)
			if err != nil {
				t.Fatal(err)
			}
			chatR, chatC := chatTexts(t, chatEvents)

			msg := o.Output[len(o.Output)-1]
			if msg.Type != "message" || msg.ID != "msg_sim_1" || msg.Status != "completed" || msg.Role != "assistant" ||
				len(msg.Content) != 1 || msg.Content[0].Type != "output_text" || msg.Content[0].Annotations == nil {
				t.Fatalf("message item %+v", msg)
			}
			if msg.Content[0].Text != chatC || chatC != strings.Join(wantC, "") {
				t.Errorf("text %q, chat %q", msg.Content[0].Text, chatC)
			}
			out := len(wantC)
			if tc.want {
				if len(o.Output) != 2 || o.Output[0].Type != "reasoning" || o.Output[0].ID != "rs_sim_1" ||
					len(o.Output[0].Summary) != 1 || o.Output[0].Summary[0].Type != "summary_text" {
					t.Fatalf("output %+v, want reasoning then message", o.Output)
				}
				if o.Output[0].Summary[0].Text != chatR || chatR != strings.Join(wantR, "") {
					t.Errorf("summary %q, chat reasoning %q", o.Output[0].Summary[0].Text, chatR)
				}
				out += len(wantR)
			} else if len(o.Output) != 1 {
				t.Errorf("reasoning not asked for, output %+v", o.Output)
			}
			u := o.Usage
			// "hello world!" and "be brief": 20 characters, 5 tokens.
			if u.InputTokens != 5 || u.OutputTokens != out || u.TotalTokens != 5+out ||
				u.InputTokensDetails.CachedTokens == nil || *u.InputTokensDetails.CachedTokens != 0 ||
				u.OutputTokensDetails.ReasoningTokens == nil || *u.OutputTokensDetails.ReasoningTokens != out-len(wantC) {
				t.Errorf("usage %+v, want 5 in, %d out", u, out)
			}
			if s.Requests() != 2 {
				t.Errorf("Requests() = %d after a Responses and a Chat request", s.Requests())
			}
		})
	}
}

// TestResponsesObjectMembers checks the members openai-go's Response
// decodes beyond the ones the relay reads, and the echoes.
func TestResponsesObjectMembers(t *testing.T) {
	_, ts := startServer(t, msgCfg)
	resp := postTo(t, ts, "/v1/responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}],`+
		`"max_output_tokens":64,"tools":[{"type":"function","name":"f","parameters":{}}],"tool_choice":"auto"}`)
	var o map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"error": `null`, "incomplete_details": `null`, "instructions": `null`, "max_output_tokens": `64`,
		"parallel_tool_calls": `true`, "previous_response_id": `null`, "store": `false`,
		"reasoning": `{"effort":null,"summary":null}`, "text": `{"format":{"type":"text"}}`,
		"tool_choice": `"auto"`, "tools": `[{"type":"function","name":"f","parameters":{}}]`,
		"truncation": `"disabled"`, "metadata": `{}`, "access_programs": `{"cyber":"standard"}`, "temperature": `1`, "top_p": `1`,
	}
	for k, v := range want {
		if string(o[k]) != v {
			t.Errorf("%s = %s, want %s", k, o[k], v)
		}
	}
}

func TestResponsesStreamMatchesChat(t *testing.T) {
	wantR, wantC := Texts(msgCfg)
	for _, tc := range respCases {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := startServer(t, msgCfg)
			resp := postTo(t, ts, "/v1/responses", respBody(`"stream":true,`+tc.reasoning))
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			events, err := readRespEvents(t, resp.Body)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			got := reassembleResp(t, events)
			chatEvents, err := readEvents(mustPost(t, ts, streamBody).Body)
			if err != nil {
				t.Fatal(err)
			}
			chatR, chatC := chatTexts(t, chatEvents)
			if got.text != chatC || got.textDone != chatC || chatC != strings.Join(wantC, "") {
				t.Errorf("text %q, done %q, chat %q", got.text, got.textDone, chatC)
			}

			wantTypes := []string{"response.created", "response.in_progress"}
			out := len(wantC)
			if tc.want {
				if got.summary != chatR || got.summaryDone != chatR || chatR != strings.Join(wantR, "") {
					t.Errorf("summary %q, done %q, chat reasoning %q", got.summary, got.summaryDone, chatR)
				}
				wantTypes = append(wantTypes, "response.output_item.added", "response.reasoning_summary_part.added")
				for range wantR {
					wantTypes = append(wantTypes, "response.reasoning_summary_text.delta")
				}
				wantTypes = append(wantTypes, "response.reasoning_summary_text.done",
					"response.reasoning_summary_part.done", "response.output_item.done")
				out += len(wantR)
			} else if got.summary != "" {
				t.Errorf("reasoning not asked for, got %q", got.summary)
			}
			wantTypes = append(wantTypes, "response.output_item.added", "response.content_part.added")
			for range wantC {
				wantTypes = append(wantTypes, "response.output_text.delta")
			}
			wantTypes = append(wantTypes, "response.output_text.done", "response.content_part.done",
				"response.output_item.done", "response.completed")
			if !slices.Equal(got.types, wantTypes) {
				t.Errorf("events\n got %q\nwant %q", got.types, wantTypes)
			}

			// response.completed carries the whole response: the same
			// object the non-streaming answer is.
			raw, _ := json.Marshal(got.completed)
			var o respObj
			if err := json.Unmarshal(raw, &o); err != nil {
				t.Fatal(err)
			}
			if o.ID != "resp_sim_1" || o.Status != "completed" || o.Usage.OutputTokens != out || o.Usage.InputTokens != 5 {
				t.Errorf("completed %s", raw)
			}
			last := o.Output[len(o.Output)-1]
			if len(last.Content) != 1 || last.Content[0].Text != chatC || len(o.Output) != map[bool]int{true: 2, false: 1}[tc.want] {
				t.Errorf("completed output %+v", o.Output)
			}
			created := events[0].data["response"].(map[string]any)
			if created["status"] != "in_progress" || created["usage"] != nil || len(created["output"].([]any)) != 0 {
				t.Errorf("response.created %s", events[0].raw)
			}
		})
	}
}

// TestResponsesDeltaShape checks the members of a text delta that the
// SDKs decode: item_id, output_index, content_index and logprobs [].
func TestResponsesDeltaShape(t *testing.T) {
	_, ts := startServer(t, msgCfg)
	events, err := readRespEvents(t, postTo(t, ts, "/v1/responses", respBody(`"stream":true,`)).Body)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(events, func(e respEvent) bool { return e.typ == "response.output_text.delta" })
	if i < 0 {
		t.Fatal("no output_text.delta")
	}
	_, content := Texts(msgCfg)
	var first strings.Builder // without HTML escaping, as the server writes
	enc := json.NewEncoder(&first)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(content[0])
	want := `{"type":"response.output_text.delta","item_id":"msg_sim_1","output_index":0,"content_index":0,"delta":` +
		strings.TrimSuffix(first.String(), "\n") + `,"logprobs":[],"sequence_number":` + strconv.Itoa(i) + `}`
	if events[i].raw != want {
		t.Errorf("delta\n got %s\nwant %s", events[i].raw, want)
	}
}

// TestResponsesPacedLikeChat checks that each channel keeps its own
// pattern: reasoning summary deltas the reasoning pattern's, output
// text deltas the content pattern's.
func TestResponsesPacedLikeChat(t *testing.T) {
	// Bursts of 2: a pause between the 2nd and 3rd delta of each phase.
	cfg := Config{ReasoningTokens: new(4), ContentTokens: new(4),
		ReasoningPattern: Pattern{Kind: Clustered, Burst: 2, Pause: 80 * time.Millisecond, BurstSpread: time.Millisecond},
		ContentPattern:   Pattern{Kind: Clustered, Burst: 2, Pause: 40 * time.Millisecond, BurstSpread: time.Millisecond}}
	_, ts := startServer(t, cfg)
	events, err := readRespEvents(t, postTo(t, ts, "/v1/responses", respBody(`"stream":true,"reasoning":{"effort":"high"},`)).Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		typ   string
		pause time.Duration
	}{
		{"response.reasoning_summary_text.delta", 80 * time.Millisecond},
		{"response.output_text.delta", 40 * time.Millisecond},
	} {
		var at []time.Time
		for _, ev := range events {
			if ev.typ == tc.typ {
				at = append(at, ev.at)
			}
		}
		if len(at) != 4 {
			t.Fatalf("%d %s", len(at), tc.typ)
		}
		// Times are when the client read each event: a read of the
		// burst's last delta that comes late (a loaded machine, -race)
		// shortens the gap the client sees, so the bound leaves a
		// quarter of the pause for that; without the pause the gap is
		// the burst spread, 1 ms.
		if gap := at[2].Sub(at[1]); gap < tc.pause*3/4 {
			t.Errorf("%s: gap %v between bursts, want about %v", tc.typ, gap, tc.pause)
		}
	}
}
