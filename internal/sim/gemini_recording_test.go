package sim

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// memberPaths adds to paths the path of every member of the JSON value v,
// arrays written [] ("candidates[].content.parts[].text").
func memberPaths(prefix string, v any, paths map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			paths[p] = true
			memberPaths(p, sub, paths)
		}
	case []any:
		for _, sub := range v {
			memberPaths(prefix+"[]", sub, paths)
		}
	}
}

// sseChunks splits an alt=sse body, framed with "\r\n\r\n" or "\n\n",
// into its decoded data payloads.
func sseChunks(t *testing.T, raw []byte) []any {
	t.Helper()
	raw = bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n"))
	var out []any
	for ev := range bytes.SplitSeq(raw, []byte("\n\n")) {
		data, ok := bytes.CutPrefix(ev, []byte("data: "))
		if !ok {
			continue
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		out = append(out, v)
	}
	return out
}

// TestGeminiShapeMatchesRecording: the simulator's streamed chunks (text,
// and a function call, thoughts hidden as in the recordings) have every
// member the real gemini-2.5-flash streams in testdata/gemini have, and
// no others but those named here.
func TestGeminiShapeMatchesRecording(t *testing.T) {
	real := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join("testdata", "gemini", "*.sse"))
	if len(files) != 3 {
		t.Fatalf("recordings %v", files)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range sseChunks(t, raw) {
			memberPaths("", c, real)
		}
	}
	fc, _ := os.ReadFile(filepath.Join("testdata", "gemini", "function_call.sse"))
	if !bytes.HasSuffix(fc, []byte("}\r\n\r\n")) {
		t.Errorf("function_call.sse is not the CRLF-framed recording")
	}

	_, ts := startServer(t, gemCfg)
	ours := map[string]bool{}
	for _, body := range []string{gemBody(""), gemBody(forceCall)} {
		raw := new(bytes.Buffer)
		if _, err := raw.ReadFrom(gemPost(t, ts, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body).Body); err != nil {
			t.Fatal(err)
		}
		for _, c := range sseChunks(t, raw.Bytes()) {
			memberPaths("", c, ours)
		}
	}

	// Members only one side has, and why.
	onlyOurs := map[string]string{
		// Gemini 3 and Vertex send call ids; 2.5 on the Gemini API did not
		// in this recording. The relay must carry them when they come.
		"candidates[].content.parts[].functionCall.id": "call ids",
		// The simulator's function call has the fixed args {"input":"sim"}.
		"candidates[].content.parts[].functionCall.args.input": "the simulator's args",
	}
	onlyReal := map[string]string{
		"candidates[].finishMessage": "a human-readable note on function-call turns",
		// The recorded call's own args.
		"candidates[].content.parts[].functionCall.args.location": "the recording's args",
	}
	var extra, missing []string
	for p := range ours {
		if !real[p] && onlyOurs[p] == "" {
			extra = append(extra, p)
		}
	}
	for p := range real {
		if !ours[p] && onlyReal[p] == "" {
			missing = append(missing, p)
		}
	}
	slices.Sort(extra)
	slices.Sort(missing)
	if len(extra) != 0 || len(missing) != 0 {
		t.Errorf("members the recordings lack: %v\nmembers the simulator lacks: %v\n(recorded: %s)", extra, missing,
			strings.Join(slices.Sorted(maps.Keys(real)), " "))
	}
}
