package chat

import (
	"encoding/json"
	"testing"
)

func TestRenameReasoning(t *testing.T) {
	for _, tc := range []struct{ in, to, want string }{
		{`{"choices":[{"index":0,"delta":{"reasoning":"hm"}}]}`, FieldReasoningContent,
			`{"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}`},
		{`{"choices":[{"delta":{"reasoning_content":"a\"b"}}],"x":1}`, FieldReasoning,
			`{"choices":[{"delta":{"reasoning":"a\"b"}}],"x":1}`},
		// non-stream message, spaces kept
		{`{"choices": [ {"message": {"role":"assistant", "reasoning" : "r", "content":"c"}} ]}`, FieldReasoningContent,
			`{"choices": [ {"message": {"role":"assistant", "reasoning_content" : "r", "content":"c"}} ]}`},
		// both present: nothing renamed
		{`{"choices":[{"delta":{"reasoning":"r","reasoning_content":"r"}}]}`, FieldReasoningContent,
			`{"choices":[{"delta":{"reasoning":"r","reasoning_content":"r"}}]}`},
		// not a string: left alone
		{`{"choices":[{"delta":{"reasoning":{"effort":"low"}}}]}`, FieldReasoningContent,
			`{"choices":[{"delta":{"reasoning":{"effort":"low"}}}]}`},
		// elsewhere in the body: left alone
		{`{"reasoning":"x","choices":[{"delta":{"content":"reasoning"}}]}`, FieldReasoningContent,
			`{"reasoning":"x","choices":[{"delta":{"content":"reasoning"}}]}`},
		// two choices
		{`{"choices":[{"delta":{"reasoning":"a"}},{"delta":{"reasoning":"b"}}]}`, FieldReasoningContent,
			`{"choices":[{"delta":{"reasoning_content":"a"}},{"delta":{"reasoning_content":"b"}}]}`},
		// invalid JSON: unchanged
		{`{"choices":[{"delta":{"reasoning":"a"}}`, FieldReasoningContent, `{"choices":[{"delta":{"reasoning":"a"}}`},
	} {
		got, _ := RenameReasoning([]byte(tc.in), tc.to)
		if string(got) != tc.want {
			t.Errorf("RenameReasoning(%s, %s)\n got %s\nwant %s", tc.in, tc.to, got, tc.want)
		}
	}
}

func FuzzRenameReasoning(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"reasoning":"hm"}}]}`), true)
	f.Add([]byte(`{"choices":[{"message":{"reasoning_content":"hm","reasoning":"x"}}]}`), false)
	f.Fuzz(func(t *testing.T, data []byte, toContent bool) {
		to := FieldReasoning
		if toContent {
			to = FieldReasoningContent
		}
		out, changed := RenameReasoning(data, to)
		if !changed {
			if string(out) != string(data) {
				t.Fatal("unchanged output differs from input")
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %s", out)
		}
		// Renaming back restores the input when every renamed key was the other name.
		var a, b any
		if json.Unmarshal(data, &a) != nil || json.Unmarshal(out, &b) != nil {
			t.Fatal("input or output does not decode")
		}
	})
}
