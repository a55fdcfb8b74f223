package traces

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var required = []string{
	"steady", "steady-fast", "bursts-300ms", "bursts-150ms", "reasoning-clustered", "reasoning-then-answer", "reasoning-answer-250ms",
	"tagged-reasoning", "onoff", "final-dump", "cjk", "emoji-zwj", "base64", "tools", "logprobs", "n2", "usage",
	"error-mid", "eof-no-done",
}

var clustered = []string{"bursts-300ms", "bursts-150ms", "reasoning-clustered", "reasoning-then-answer", "reasoning-answer-250ms", "tagged-reasoning", "onoff", "cjk", "emoji-zwj"}

func TestSetNamesAndFlags(t *testing.T) {
	names := Names()
	if !slices.Equal(names, required) {
		t.Fatalf("names %v, want %v", names, required)
	}
	for _, tr := range All() {
		if got, want := tr.Clustered, slices.Contains(clustered, tr.Name); got != want {
			t.Errorf("%s: Clustered %v, want %v", tr.Name, got, want)
		}
		want := EndsDone
		switch tr.Name {
		case "error-mid":
			want = EndsError
		case "eof-no-done":
			want = EndsEOF
		}
		if tr.Ends != want {
			t.Errorf("%s: Ends %q, want %q", tr.Name, tr.Ends, want)
		}
		if got, ok := ByName(tr.Name); !ok || got.Name != tr.Name {
			t.Errorf("ByName(%q) failed", tr.Name)
		}
	}
	if _, ok := ByName("nope"); ok {
		t.Fatal("ByName(nope) found something")
	}
}

func TestDeterministic(t *testing.T) {
	a, b := generate(), generate()
	for i := range a {
		if len(a[i].Steps) != len(b[i].Steps) || a[i].Answer != b[i].Answer || a[i].Reasoning != b[i].Reasoning {
			t.Fatalf("%s differs between builds", a[i].Name)
		}
		for j := range a[i].Steps {
			if a[i].Steps[j].At != b[i].Steps[j].At || !bytes.Equal(a[i].Steps[j].Raw, b[i].Steps[j].Raw) {
				t.Fatalf("%s step %d differs between builds", a[i].Name, j)
			}
		}
	}
}

// header is the part of a chunk every data event except errors has.
type header struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices json.RawMessage `json:"choices"`
}

func TestEventsParseAndTextsMatch(t *testing.T) {
	for _, tr := range All() {
		t.Run(tr.Name, func(t *testing.T) {
			for i, s := range tr.Steps {
				if i > 0 && s.At < tr.Steps[i-1].At {
					t.Fatalf("step %d at %v before step %d at %v", i, s.At, i-1, tr.Steps[i-1].At)
				}
				last := i == len(tr.Steps)-1
				complete := bytes.HasSuffix(s.Raw, []byte("\n\n"))
				if !complete && !(last && tr.Ends == EndsEOF) {
					t.Fatalf("step %d is not complete blocks: %.60q", i, s.Raw)
				}
				if last && tr.Ends == EndsEOF && complete {
					t.Fatal("an eof trace must end with a cut-off block")
				}
			}
			evs, err := tr.Events()
			if err != nil {
				t.Fatal(err)
			}
			for i, ev := range evs {
				if string(ev.Data) == "[DONE]" || bytes.HasPrefix(ev.Data, []byte(`{"error"`)) {
					continue
				}
				var h header
				if err := json.Unmarshal(ev.Data, &h); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if h.ID != chunkID || h.Object != "chat.completion.chunk" || h.Created != chunkCreated || h.Model != chunkModel || h.Choices == nil {
					t.Fatalf("event %d header %+v", i, h)
				}
				if !utf8.Valid(ev.Data) {
					t.Fatalf("event %d is not UTF-8", i)
				}
			}
			first := string(evs[0].Data)
			if !strings.Contains(first, `"delta":{"role":"assistant","content":""}`) {
				t.Fatalf("first event %s", first)
			}
			tx, err := tr.Transcript()
			if err != nil {
				t.Fatal(err)
			}
			if r, a := tr.Sent(); string(tx.Reasoning) != r || string(tx.Answer) != a {
				t.Fatalf("texts differ from the events': reasoning %.80q, answer %.80q; want %.80q, %.80q", tx.Reasoning, tx.Answer, r, a)
			}
			if tr.Tagged {
				// All of it is content, and the texts a relay
				// delivers are what the tags hold and follow.
				if r, _ := tr.Sent(); r != "" || tr.Reasoning == "" || strings.Contains(tr.Reasoning+tr.Answer, "think>") {
					t.Fatal("a tagged trace's texts hold a tag, or it has no reasoning")
				}
			}
			if tr.Answer == "" {
				t.Fatal("no answer text")
			}
			if tx.AfterEnd != 0 {
				t.Fatalf("%d events after the end", tx.AfterEnd)
			}
			if tx.Done != (tr.Ends == EndsDone) {
				t.Fatalf("done %v, ends %s", tx.Done, tr.Ends)
			}
			if (len(tx.Errors) > 0) != (tr.Ends == EndsError) {
				t.Fatalf("errors %v, ends %s", tx.Errors, tr.Ends)
			}
			if tr.Ends == EndsDone {
				if !strings.Contains(tx.Usage, `"completion_tokens_details":{"reasoning_tokens":`) {
					t.Fatalf("usage %s", tx.Usage)
				}
				for i, c := range tx.Choices {
					if c.Finish == "" || c.Role != "assistant" {
						t.Fatalf("choice %d: finish %q role %q", i, c.Finish, c.Role)
					}
				}
			}
			// The transcript agrees with itself and differs from a
			// changed one.
			if d := tx.Diff(tx); d != "" {
				t.Fatal(d)
			}
			other, _ := tr.Transcript()
			other.Answer = append(other.Answer, 'x')
			if tx.Diff(other) == "" {
				t.Fatal("Diff missed a changed answer")
			}
		})
	}
}

// eventTimes returns the offsets of the trace's events carrying text.
func textEvents(t *testing.T, tr Trace) (times []time.Duration, runes []int) {
	t.Helper()
	evs, err := tr.Events()
	if err != nil {
		t.Fatal(err)
	}
	var tx Transcript
	for _, ev := range evs {
		pieces, err := tx.Add(ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range pieces {
			n += p.Runes()
		}
		if n > 0 {
			times = append(times, ev.At)
			runes = append(runes, n)
		}
	}
	return times, runes
}

func TestShapes(t *testing.T) {
	get := func(name string) Trace {
		tr, ok := ByName(name)
		if !ok {
			t.Fatalf("no trace %s", name)
		}
		return tr
	}
	// steady: ~25 events/s over ~3 s; steady-fast: 100/s.
	for _, c := range []struct {
		name string
		rate float64
	}{{"steady", 25}, {"steady-fast", 100}} {
		times, _ := textEvents(t, get(c.name))
		span := (times[len(times)-1] - times[0]).Seconds()
		rate := float64(len(times)-1) / span
		if span < 2.5 || span > 3.5 || rate < 0.95*c.rate || rate > 1.05*c.rate {
			t.Errorf("%s: %d events over %.2fs (%.1f/s)", c.name, len(times), span, rate)
		}
	}
	// bursts: 20 tokens within 5 ms every period.
	for _, c := range []struct {
		name   string
		period time.Duration
	}{{"bursts-300ms", 300 * ms}, {"bursts-150ms", 150 * ms}} {
		times, _ := textEvents(t, get(c.name))
		if len(times)%20 != 0 {
			t.Fatalf("%s: %d events", c.name, len(times))
		}
		for b := 0; b < len(times); b += 20 {
			if times[b+19]-times[b] > 5*ms {
				t.Errorf("%s: burst %d spans %v", c.name, b/20, times[b+19]-times[b])
			}
			if b > 0 && times[b]-times[b-20] != c.period {
				t.Errorf("%s: burst period %v", c.name, times[b]-times[b-20])
			}
		}
	}
	// reasoning-clustered: reasoning first, then a 1.2 s silence, then
	// the answer at 30/s.
	rc := get("reasoning-clustered")
	if len([]rune(rc.Reasoning)) == 0 || len(rc.Answer) == 0 {
		t.Fatal("reasoning-clustered needs both channels")
	}
	times, _ := textEvents(t, rc)
	maxGap := time.Duration(0)
	for i := 1; i < len(times); i++ {
		maxGap = max(maxGap, times[i]-times[i-1])
	}
	if maxGap != 1200*ms {
		t.Errorf("reasoning-clustered: longest silence %v, want 1.2s", maxGap)
	}
	// reasoning-answer-250ms: reasoning bursts 300 ms apart, one burst
	// that carries the end of the reasoning and the start of the answer,
	// then answer bursts 250 ms apart.
	checkSwitch(t, get("reasoning-answer-250ms"), 300*ms, 250*ms)
	// tagged-reasoning: both tags cut between two reads, inside the
	// tag.
	evs, err := get("tagged-reasoning").Events()
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"<think>", "</think>"} {
		cut := false
		for i := 1; i < len(evs); i++ {
			a, b := contentOf(t, evs[i-1].Data), contentOf(t, evs[i].Data)
			if evs[i].Step != evs[i-1].Step && strings.Contains(a+b, tag) && !strings.Contains(a, tag) && !strings.Contains(b, tag) {
				cut = true
			}
		}
		if !cut {
			t.Errorf("tagged-reasoning: %s is not cut between two reads", tag)
		}
	}
	// onoff: silences of 2.5 s and 4 s.
	times, _ = textEvents(t, get("onoff"))
	var long []time.Duration
	for i := 1; i < len(times); i++ {
		if g := times[i] - times[i-1]; g > time.Second {
			long = append(long, g)
		}
	}
	if !slices.Equal(long, []time.Duration{2500 * ms, 4000 * ms}) {
		t.Errorf("onoff silences %v", long)
	}
	// final-dump: one text event of >= 2000 characters after 2 s.
	times, runes := textEvents(t, get("final-dump"))
	if len(times) != 1 || times[0] != 2*time.Second || runes[0] < 2000 {
		t.Errorf("final-dump: %v %v", times, runes)
	}
	// cjk: no spaces; mostly non-ASCII.
	if a := get("cjk").Answer; strings.ContainsAny(a, " \t\n") || utf8.RuneCountInString(a) == len(a) {
		t.Errorf("cjk text %q", a)
	}
	// emoji-zwj: long runs of ZWJ sequences in one event.
	found := false
	evs, _ = get("emoji-zwj").Events()
	for _, ev := range evs {
		if strings.Count(string(ev.Data), "\u200d") >= 12 {
			found = true
		}
	}
	if !found {
		t.Error("emoji-zwj has no event with a long ZWJ run")
	}
	// base64: a 3000-character run without spaces.
	longest := 0
	for _, f := range strings.FieldsFunc(get("base64").Answer, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '+' || r == '/' || r == '=')
	}) {
		longest = max(longest, len(f))
	}
	if longest < 3000 {
		t.Errorf("base64: longest run %d", longest)
	}
	// tools: two tool calls with fragmented, valid JSON arguments.
	tx, _ := get("tools").Transcript()
	calls := tx.Choices[0].ToolCalls
	if len(calls) != 2 || tx.Choices[0].Finish != "tool_calls" {
		t.Fatalf("tools: %d calls, finish %q", len(calls), tx.Choices[0].Finish)
	}
	for i, c := range calls {
		if !json.Valid(c.Arguments) || c.Name == "" || c.ID == "" {
			t.Errorf("tool call %d: %+v %s", i, c, c.Arguments)
		}
	}
	// logprobs: every text chunk has logprobs.
	tx, _ = get("logprobs").Transcript()
	if n := bytes.Count(tx.Choices[0].Logprobs, []byte("\n")); n != 80 {
		t.Errorf("logprobs: %d non-null logprobs", n)
	}
	// n2: two choices with text.
	tx, _ = get("n2").Transcript()
	if len(tx.Choices) != 2 || len(tx.Choices[0].Answer) == 0 || len(tx.Choices[1].Answer) == 0 {
		t.Errorf("n2: %d choices", len(tx.Choices))
	}
	// usage: every chunk carries "usage".
	evs, _ = get("usage").Events()
	for i, ev := range evs[:len(evs)-1] {
		if !bytes.Contains(ev.Data, []byte(`"usage":`)) {
			t.Errorf("usage: event %d has no usage field", i)
		}
	}
}

// Every clustered trace says how far apart its clusters are, and no
// other trace does.
func TestCadence(t *testing.T) {
	for _, tr := range All() {
		if tr.Clustered != (tr.Cadence > 0) {
			t.Errorf("%s: clustered %v, cadence %v", tr.Name, tr.Clustered, tr.Cadence)
		}
		if tr.LanesClustered && (!tr.Clustered || tr.Reasoning == "" || tr.Answer == "") {
			t.Errorf("%s: lanes clustered, but not clustered or without both channels", tr.Name)
		}
	}
}

// checkSwitch checks a trace whose reasoning comes in bursts rsnEvery
// apart, then one burst that holds both channels, then the answer in
// bursts ansEvery apart.
func checkSwitch(t *testing.T, tr Trace, rsnEvery, ansEvery time.Duration) {
	t.Helper()
	evs, err := tr.Events()
	if err != nil {
		t.Fatal(err)
	}
	var tx Transcript
	type burst struct {
		at        time.Duration
		rsn, ans  bool
		lastStart time.Duration
	}
	var bursts []burst
	for _, ev := range evs {
		pieces, err := tx.Add(ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pieces {
			if n := len(bursts); n == 0 || ev.At-bursts[n-1].lastStart > 10*ms {
				bursts = append(bursts, burst{at: ev.At})
			}
			b := &bursts[len(bursts)-1]
			b.lastStart = ev.At
			if p.Reasoning {
				b.rsn = true
			} else {
				b.ans = true
			}
		}
	}
	sw := -1
	for i, b := range bursts {
		if b.rsn && b.ans {
			if sw >= 0 {
				t.Fatalf("%s: bursts %d and %d both hold both channels", tr.Name, sw, i)
			}
			sw = i
		}
	}
	if sw < 3 || sw > len(bursts)-4 {
		t.Fatalf("%s: switching burst %d of %d", tr.Name, sw, len(bursts))
	}
	for i := 1; i < len(bursts); i++ {
		want := rsnEvery
		if i > sw {
			want = ansEvery
		}
		if got := bursts[i].at - bursts[i-1].at; got != want {
			t.Errorf("%s: burst %d comes %v after the one before, want %v", tr.Name, i, got, want)
		}
		if i < sw && (bursts[i].ans || !bursts[i].rsn) || i > sw && (bursts[i].rsn || !bursts[i].ans) {
			t.Errorf("%s: burst %d holds the wrong channel", tr.Name, i)
		}
	}
}

// contentOf returns the content of a chunk's choices.
func contentOf(t *testing.T, data []byte) string {
	t.Helper()
	var tx Transcript
	if _, err := tx.Add(data); err != nil {
		t.Fatal(err)
	}
	return string(tx.Answer)
}

// A client reads reasoning under either name; a chunk with both (a relay
// sending both names) carries it once.
func TestTranscriptReasoningNames(t *testing.T) {
	var tx Transcript
	for _, data := range []string{
		`{"choices":[{"index":0,"delta":{"reasoning_content":"a"}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning":"b"}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_content":"c","reasoning":"c"}}]}`,
	} {
		if _, err := tx.Add([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if string(tx.Reasoning) != "abc" || string(tx.Choices[0].Reasoning) != "abc" {
		t.Fatalf("reasoning %q", tx.Reasoning)
	}
}
