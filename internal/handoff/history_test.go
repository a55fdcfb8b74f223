package handoff

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// historyBodies hold earlier turns' reasoning in each dialect, some with
// names or types spelled with escapes, and conversations without any
// (which stripHistory passes over undecoded).
var historyBodies = []struct {
	d    Dialect
	body string
	gone string // text that must not reach the answer leg ("" : none)
}{
	{Chat, `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b","reasoning_content":"SECRET1"},{"role":"user","content":"c"}]}`, "SECRET1"},
	{Chat, `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b","re\u0061soning_content":"SECRET2"},{"role":"user","content":"c"}]}`, "SECRET2"},
	{Chat, `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b","reasoning":"SECRET3"},{"role":"user","content":"c <b> & \u00e9"}]}`, "SECRET3"},
	{Chat, `{"model":"m","messages":[{"role":"user","content":"no history <tag> & \u2028"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`, ""},
	{Chat, `{"model":"m","messages":null}`, ""},
	{Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"SECRET4","signature":"s"},{"type":"text","text":"b"}]},{"role":"user","content":"c"}]}`, "SECRET4"},
	{Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thin\u006bing","thinking":"SECRET5"},{"type":"text","text":"b"}]},{"role":"user","content":"c"}]}`, "SECRET5"},
	{Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"redacted_thinking","data":"SECRET6"}]},{"role":"user","content":"c"}]}`, "SECRET6"},
	{Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`, ""},
	{Responses, `{"model":"m","input":[{"type":"message","role":"user","content":"a"},{"type":"reasoning","summary":[{"type":"summary_text","text":"SECRET7"}]},{"type":"message","role":"user","content":"c"}]}`, "SECRET7"},
	{Responses, `{"model":"m","input":[{"type":"message","role":"user","content":"a"},{"type":"message","role":"user","content":"c"}]}`, ""},
	{Responses, `{"model":"m","input":"just text"}`, ""},
}

// TestStripHistoryPassesOverOnlyWhatHasNone: earlier turns' reasoning is
// removed in every spelling, and a conversation passed over undecoded
// gives the same request (as JSON) as one decoded and re-encoded.
func TestStripHistoryPassesOverOnlyWhatHasNone(t *testing.T) {
	defer func() { fastHistory = true }()
	for _, tc := range historyBodies {
		for _, where := range []Inject{Prefill, User, System} {
			var got [2]any
			for i, fast := range []bool{true, false} {
				fastHistory = fast
				b, err := Answer(tc.d, []byte(tc.body), "R", where)
				if err != nil {
					t.Fatalf("%s: %v", tc.body, err)
				}
				if tc.gone != "" && strings.Contains(string(b), tc.gone) {
					t.Errorf("fast %v: %s: the earlier turn's reasoning reached the answer leg: %s", fast, tc.body, b)
				}
				if err := json.Unmarshal(b, &got[i]); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(got[0], got[1]) {
				t.Errorf("%s, %s: passed over %v, decoded %v", tc.body, where, got[0], got[1])
			}
		}
	}
}

// TestMessagesNotObjects: a messages member that is not an array of
// objects is refused, passed over or not.
func TestMessagesNotObjects(t *testing.T) {
	for _, body := range []string{`{"model":"m","messages":[1]}`, `{"model":"m","messages":"x"}`, `{"model":"m","messages":[{"role":"user","content":"a"},"b"]}`} {
		if _, err := Reason(Chat, []byte(body)); err == nil {
			t.Errorf("Reason(%s): no error", body)
		}
		if _, err := Answer(Chat, []byte(body), "R", User); err == nil {
			t.Errorf("Answer(%s): no error", body)
		}
	}
}
