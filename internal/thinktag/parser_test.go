package thinktag

import (
	"strings"
	"testing"
)

var (
	cfgTags     = Config{}
	cfgKeep     = Config{KeepNewlines: true}
	cfgR1       = Config{StartsInReasoning: true}
	cfgQwen35   = Config{StartsInReasoning: true, EndMarkers: []string{Qwen35ToolCall}}
	cfgAuto     = Config{AtStart: true}
	cfgKimi     = Config{Tags: []Tag{Kimi}}
	cfgSeed     = Config{Tags: []Tag{Seed}}
	cfgEveryone = Config{Tags: []Tag{Think, Thinking, Kimi, Seed}, EndMarkers: []string{Qwen35ToolCall}}
)

// TestSplit is the table of the package's rules: each text whole, then
// cut at every byte (every piece one byte long), then at every single
// offset, must give the same split, and the reference must agree.
func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		in   string
		want result
	}{
		{"no tags", cfgTags, "Hello, world.", result{Answer: "Hello, world."}},
		{"empty text", cfgTags, "", result{}},
		{"both tags, newlines dropped", cfgTags, "<think>\nLet me see.\n</think>\n\nThe answer is 4.",
			result{Reasoning: "Let me see.\n", Answer: "The answer is 4.", Blocks: 1}},
		{"both tags, newlines kept", cfgKeep, "<think>\nLet me see.\n</think>\n\nThe answer is 4.",
			result{Reasoning: "\nLet me see.\n", Answer: "\n\nThe answer is 4.", Blocks: 1}},
		{"spaces after the closing tag are kept", cfgTags, "<think>r</think> answer",
			result{Reasoning: "r", Answer: " answer", Blocks: 1}},
		{"CRLF newlines dropped", cfgTags, "<think>\r\nr\r\n</think>\r\n\r\nanswer",
			result{Reasoning: "r\r\n", Answer: "answer", Blocks: 1}},
		{"text before the opening tag is answer", cfgTags, "Sure. <think>hm</think>Done.",
			result{Reasoning: "hm", Answer: "Sure. Done.", Blocks: 1}},

		{"R1: no opening tag", cfgR1, "Okay, the user wants 2+2.\n</think>\n\n4",
			result{Reasoning: "Okay, the user wants 2+2.\n", Answer: "4", Blocks: 1}},
		{"R1: leading newline dropped", cfgR1, "\nOkay.</think>4",
			result{Reasoning: "Okay.", Answer: "4", Blocks: 1}},
		{"R1-0528: opening tag written anyway", cfgR1, "<think>\nOkay.\n</think>\n\n4",
			result{Reasoning: "Okay.\n", Answer: "4", Blocks: 1}},
		{"R1: opening tag after newlines", cfgR1, "\n\n<think>Okay.</think>4",
			result{Reasoning: "Okay.", Answer: "4", Blocks: 1}},
		{"R1: opening tag later is reasoning text", cfgR1, "Use <think> here.</think>4",
			result{Reasoning: "Use <think> here.", Answer: "4", Blocks: 1}},
		{"R1: any family's closing tag ends the implicit block", Config{StartsInReasoning: true}, "x</thinking>y",
			result{Reasoning: "x", Answer: "y", Blocks: 1}},
		{"R1: the written opening tag decides the family", cfgR1, "<thinking>x</think>y</thinking>z",
			result{Reasoning: "x</think>y", Answer: "z", Blocks: 1}},
		{"R1: truncated", cfgR1, "Okay, let me think about",
			result{Reasoning: "Okay, let me think about", Blocks: 1, Unclosed: true}},
		{"R1: nothing at all is not unclosed", cfgR1, "",
			result{Blocks: 1}},
		{"R1: only newlines is not unclosed", cfgR1, "\n\n",
			result{Blocks: 1}},
		{"R1: empty reasoning", cfgR1, "</think>\n\n4",
			result{Answer: "4", Blocks: 1}},
		{"R1: stray closing tag after the block is answer", cfgR1, "r</think>a</think>b",
			result{Reasoning: "r", Answer: "a</think>b", Blocks: 1}},

		{"literal opening tag inside reasoning", cfgTags, "<think>Write <think> in the template.</think>ok",
			result{Reasoning: "Write <think> in the template.", Answer: "ok", Blocks: 1}},
		{"truncated after the opening tag", cfgTags, "<think>\nStill thinking",
			result{Reasoning: "Still thinking", Blocks: 1, Unclosed: true}},
		{"truncated right after the opening tag", cfgTags, "<think>",
			result{Blocks: 1, Unclosed: true}},
		{"truncated inside the closing tag", cfgTags, "<think>abc</thi",
			result{Reasoning: "abc</thi", Blocks: 1, Unclosed: true}},
		{"empty block", cfgTags, "<think></think>Answer",
			result{Answer: "Answer", Blocks: 1}},
		{"Qwen3 non-thinking block", cfgTags, "<think>\n\n</think>\n\nAnswer",
			result{Answer: "Answer", Blocks: 1}},
		{"two blocks", cfgTags, "<think>a</think>\n\nx<think>b</think>y",
			result{Reasoning: "ab", Answer: "xy", Blocks: 2}},
		{"blocks back to back", cfgTags, "<think>a</think>\n<think>\nb</think>c",
			result{Reasoning: "ab", Answer: "c", Blocks: 2}},
		{"stray closing tag outside", cfgTags, "a</think>b",
			result{Answer: "a</think>b"}},
		{"thinking family", cfgTags, "<thinking>x</thinking>y",
			result{Reasoning: "x", Answer: "y", Blocks: 1}},
		{"the opening tag decides the closing tag", cfgTags, "<thinking>x</think>y</thinking>z",
			result{Reasoning: "x</think>y", Answer: "z", Blocks: 1}},
		{"unterminated look-alike", cfgTags, "<thin>k <think2>",
			result{Answer: "<thin>k <think2>"}},
		{"a less-than sign before the tag", cfgTags, "a<<think>b</think>",
			result{Reasoning: "b", Answer: "a<", Blocks: 1}},

		{"Qwen3.5 tool call inside thinking", cfgQwen35,
			"I need to read the file.\n\n<tool_call>\n<function=bash>\n<parameter=command>\ncat /etc/hosts\n</parameter>\n</function>\n</tool_call>",
			result{Reasoning: "I need to read the file.\n\n",
				Answer: "<tool_call>\n<function=bash>\n<parameter=command>\ncat /etc/hosts\n</parameter>\n</function>\n</tool_call>", Blocks: 1}},
		{"Qwen3.5 tool call mentioned in thinking", cfgQwen35,
			"Should I emit <tool_call> now? Yes.</think>\n\n<tool_call>\n<function=f>",
			result{Reasoning: "Should I emit <tool_call> now? Yes.", Answer: "<tool_call>\n<function=f>", Blocks: 1}},
		{"Qwen3.5 closing tag then tool call", cfgQwen35,
			"r</think>\n\n<tool_call>\n<function=f>",
			result{Reasoning: "r", Answer: "<tool_call>\n<function=f>", Blocks: 1}},
		{"Qwen3.5 thinking again after a tool call", cfgQwen35,
			"r<tool_call>\n<function=f></function></tool_call><think>\ns</think>\n\nt",
			result{Reasoning: "rs", Answer: "<tool_call>\n<function=f></function></tool_call>t", Blocks: 2}},
		{"a marker outside a block is answer", Config{EndMarkers: []string{Qwen35ToolCall}},
			"<tool_call>\n<function=f>",
			result{Answer: "<tool_call>\n<function=f>"}},
		{"newlines after a marker are kept", cfgQwen35, "r<tool_call>\n<function=f>\n",
			result{Reasoning: "r", Answer: "<tool_call>\n<function=f>\n", Blocks: 1}},

		{"auto: block at the start", cfgAuto, "<think>r</think>a",
			result{Reasoning: "r", Answer: "a", Blocks: 1}},
		{"auto: after whitespace", cfgAuto, " \n\t<think>r</think>a",
			result{Reasoning: "r", Answer: " \n\ta", Blocks: 1}},
		{"auto: a mention is not a block", cfgAuto, "Use the <think> tag.</think> Like <think>this</think>.",
			result{Answer: "Use the <think> tag.</think> Like <think>this</think>."}},
		{"auto: a near miss at the start", cfgAuto, "<thinker> <think>x</think>",
			result{Answer: "<thinker> <think>x</think>"}},
		{"auto: later blocks anywhere", cfgAuto, "<think>r</think>a<think>s</think>b",
			result{Reasoning: "rs", Answer: "ab", Blocks: 2}},
		{"auto: only whitespace", cfgAuto, " \n",
			result{Answer: " \n"}},
		{"auto: a partial tag at the end", cfgAuto, "<thin",
			result{Answer: "<thin"}},

		{"Kimi", cfgKimi, "◁think▷用户问◁/think▷答案",
			result{Reasoning: "用户问", Answer: "答案", Blocks: 1}},
		{"Kimi look-alike", cfgKimi, "◁thin◁think▷x◁/thin▷◁/think▷y",
			result{Reasoning: "x◁/thin▷", Answer: "◁thiny", Blocks: 1}},
		{"Seed", cfgSeed, "<seed:think>plan</seed:think>do",
			result{Reasoning: "plan", Answer: "do", Blocks: 1}},
		{"every family at once", cfgEveryone, "a<seed:think>b</seed:think>c◁think▷d◁/think▷e<thinking>f</thinking>g",
			result{Reasoning: "bdf", Answer: "aceg", Blocks: 3}},
		{"multi-byte text", cfgTags, "<think>日本語の推論</think>答えは四",
			result{Reasoning: "日本語の推論", Answer: "答えは四", Blocks: 1}},
		{"user tags", Config{Tags: []Tag{{"[[r]]", "[[/r]]"}}}, "[[r]]x[[/r]]y",
			result{Reasoning: "x", Answer: "y", Blocks: 1}},
		{"same opening and closing tag", Config{Tags: []Tag{{"<|t|>", "<|t|>"}}}, "a<|t|>b<|t|>c<|t|>d",
			result{Reasoning: "bd", Answer: "ac", Blocks: 2, Unclosed: true}},
		{"overlapping user tags: the shortest wins", Config{Tags: []Tag{{"<a>", "</a>"}}, EndMarkers: []string{"</a>b"}},
			"<a>x</a>by", result{Reasoning: "x", Answer: "by", Blocks: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := MustNew(tc.cfg)
			if got := reference(tc.cfg, tc.in); got != tc.want {
				t.Fatalf("reference:\n got %+v\nwant %+v", got, tc.want)
			}
			if got := feedCfg(t, s, &tc.cfg, []byte(tc.in)); got != tc.want {
				t.Fatalf("whole:\n got %+v\nwant %+v", got, tc.want)
			}
			var bytewise [][]byte
			for i := range len(tc.in) {
				bytewise = append(bytewise, []byte(tc.in[i:i+1]))
			}
			if got := feedCfg(t, s, &tc.cfg, bytewise...); got != tc.want {
				t.Fatalf("byte by byte:\n got %+v\nwant %+v", got, tc.want)
			}
			for i := 1; i < len(tc.in); i++ {
				if got := feedCfg(t, s, &tc.cfg, cut(tc.in, i)...); got != tc.want {
					t.Fatalf("cut at %d (%q|%q):\n got %+v\nwant %+v", i, tc.in[:i], tc.in[i:], got, tc.want)
				}
			}
			r, a, st := Split(s, []byte(tc.in))
			if got := (result{string(r), string(a), st.Blocks, st.Unclosed}); got != tc.want {
				t.Fatalf("Split:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// segs renders segments as "r:text a:text".
func segs(ss []Segment) string {
	var b strings.Builder
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s.Kind.String()[:1] + ":" + string(s.Text))
	}
	return b.String()
}

// TestHoldBack follows one parser call by call: what each piece emits and
// what it holds back.
func TestHoldBack(t *testing.T) {
	type step struct {
		in   string
		out  string // segs of the call
		held int
	}
	for _, tc := range []struct {
		name  string
		cfg   Config
		steps []step
		flush string
	}{
		{"an opening tag split in three", cfgTags, []step{
			{"Hi <th", "a:Hi ", 3},
			{"in", "", 5},
			{"k>x", "r:x", 0},
		}, ""},
		{"released as soon as it cannot be a tag", cfgTags, []step{
			{"a <thi", "a:a ", 4},
			{"s is", "a:<thi a:s is", 0},
		}, ""},
		{"only the longest suffix that could start a tag", cfgTags, []step{
			{"<<<", "a:<<", 1},
			{"<t", "a:<", 2},
		}, "a:<t"},
		{"the closing tag split, then the answer", cfgR1, []step{
			{"so 4.\n</", "r:so 4.\n", 2},
			{"think", "", 7},
			{">\n", "", 0},
			{"\nFour.", "a:Four.", 0},
		}, ""},
		{"the held bytes and a new tag in one piece", cfgTags, []step{
			{"x<", "a:x", 1},
			{"y<think>r", "a:< a:y r:r", 0},
		}, ""},
		{"held at the end of the text", cfgTags, []step{
			{"<think>r</thi", "r:r", 5},
		}, "r:</thi"},
		{"a tag cut inside a rune", cfgKimi, []step{
			{"a\xe2\x97", "a:a", 2},
			{"\x81thi", "", 6},
			{"nk\xe2\x96\xb7b", "r:b", 0},
		}, ""},
		{"text after a rune cut short is not held", cfgTags, []step{
			{"日\xe6\x9c", "a:日\xe6\x9c", 0},
			{"\xac", "a:\xac", 0},
		}, ""},
		{"a marker split", cfgQwen35, []step{
			{"r<tool_call>", "r:r", 11},
			{"\n<func", "", 17},
			{"tion=f>", "a:<tool_call>\n<func a:tion=f>", 0},
		}, ""},
		{"a marker that was not one", cfgQwen35, []step{
			{"r<tool_call>\n", "r:r", 12},
			{"x", "r:<tool_call>\n r:x", 0},
		}, ""},
		{"auto: the opening tag at the start, split", cfgAuto, []step{
			{"\n<", "a:\n", 1},
			{"think>", "", 0},
			{"r</think>a", "r:r a:a", 0},
		}, ""},
		{"auto: a failed start makes the rest plain", cfgAuto, []step{
			{"<th", "", 3},
			{"e <think>", "a:<th a:e <think>", 0},
			{"x</think>", "a:x</think>", 0},
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := MustNew(tc.cfg).Parser()
			for i, st := range tc.steps {
				got := p.Feed(nil, []byte(st.in))
				if segs(got) != st.out || p.State().Held != st.held {
					t.Fatalf("piece %d %q: got %q held %d, want %q held %d", i, st.in, segs(got), p.State().Held, st.out, st.held)
				}
			}
			if got := segs(p.Flush(nil)); got != tc.flush {
				t.Fatalf("Flush: got %q, want %q", got, tc.flush)
			}
		})
	}
}

// TestFastPath checks that a piece with nothing to look at is returned as
// it is, not copied.
func TestFastPath(t *testing.T) {
	for name, c := range map[string]struct {
		cfg   Config
		first string
	}{
		"answer":    {cfgTags, "hello "},
		"reasoning": {cfgTags, "<think>x"},
		"plain":     {cfgAuto, "Hello"},
		"implicit":  {cfgR1, "Okay"},
	} {
		p := MustNew(c.cfg).Parser()
		p.Feed(nil, []byte(c.first))
		piece := []byte(" more text, no tag")
		got := p.Feed(nil, piece)
		if len(got) != 1 || &got[0].Text[0] != &piece[0] || len(got[0].Text) != len(piece) {
			t.Errorf("%s: got %q, want the piece itself", name, segs(got))
		}
	}
}

// TestReset checks that a parser reset after a text starts afresh.
func TestReset(t *testing.T) {
	p := MustNew(cfgR1).Parser()
	p.Feed(nil, []byte("a</think>b<thi"))
	p.Flush(nil)
	p.Reset()
	if st := p.State(); st != (State{Reasoning: true, Blocks: 1}) {
		t.Fatalf("after Reset: %+v", st)
	}
	if got := segs(p.Flush(p.Feed(nil, []byte("\nc</think>d")))); got != "r:c a:d" {
		t.Fatalf("after Reset: %q", got)
	}
}

// TestNewRefuses lists the configurations New refuses.
func TestNewRefuses(t *testing.T) {
	long := "<" + strings.Repeat("x", MaxTagLen) + ">"
	for name, cfg := range map[string]Config{
		"no family":           {Tags: []Tag{}},
		"empty opening tag":   {Tags: []Tag{{"", "</x>"}}},
		"empty closing tag":   {Tags: []Tag{{"<x>", ""}}},
		"too long":            {Tags: []Tag{{long, "</x>"}}},
		"leading whitespace":  {Tags: []Tag{{" <x>", "</x>"}}},
		"shared opening tag":  {Tags: []Tag{{"<x>", "</x>"}, {"<x>", "</y>"}}},
		"empty marker":        {EndMarkers: []string{""}},
		"marker is a tag":     {EndMarkers: []string{"</think>"}},
		"marker with newline": {EndMarkers: []string{"\n<tool_call>"}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	if _, err := New(Config{Tags: []Tag{{"<x>", "</x>"}, {"<y>", "</x>"}}}); err != nil {
		t.Errorf("families sharing a closing tag: %v", err)
	}
}

// TestSteadyStateAllocs checks that Feed allocates nothing when dst has
// room: plain text, text in a block, a piece that holds back, and one that
// releases what was held.
func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	p := MustNew(cfgQwen35).Parser()
	dst := make([]Segment, 0, 8)
	pieces := [][]byte{
		[]byte("Okay, so"), []byte(" the user wants </thi"), []byte("s, not a tag <tool_"),
		[]byte("call> mention"), []byte("</think>\n\n"), []byte("The answer"), []byte(" is 4."),
	}
	f := func() {
		p.Reset()
		for _, pc := range pieces {
			dst = p.Feed(dst[:0], pc)
		}
		dst = p.Flush(dst[:0])
	}
	if a := testing.AllocsPerRun(1000, f); a != 0 {
		t.Errorf("%v allocs per text, want 0", a)
	}
}
