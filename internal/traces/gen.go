package traces

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"
	"time"
)

// Fixed chunk header fields.
const (
	chunkID      = "chatcmpl-trace"
	chunkCreated = 1700000000
	chunkModel   = "trace"
	promptTokens = 8
)

// wire types for writing; field order is wire order.
type chunk struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []choice        `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"` // absent, null or the usage object
}

type choice struct {
	Index        int             `json:"index"`
	Delta        delta           `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"` // nil marshals as null
	FinishReason *string         `json:"finish_reason"`
}

type delta struct {
	Role             string     `json:"role,omitempty"`
	Content          *string    `json:"content,omitempty"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCall `json:"tool_calls,omitempty"`
}

type toolCall struct {
	Index    int      `json:"index"`
	ID       string   `json:"id,omitempty"`
	Type     string   `json:"type,omitempty"`
	Function toolFunc `json:"function"`
}

type toolFunc struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type usage struct {
	PromptTokens            int `json:"prompt_tokens"`
	CompletionTokens        int `json:"completion_tokens"`
	TotalTokens             int `json:"total_tokens"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

var jsonNull = json.RawMessage("null")

// gen builds one trace. Events are queued with ev and written out as a
// step with at.
type gen struct {
	t         Trace
	rng       *rng
	usageNull bool // every chunk carries "usage":null
	pending   []byte
	reasoning strings.Builder
	answer    strings.Builder
	rTokens   int
	aTokens   int
}

func newGen(name string, seed uint64) *gen {
	return &gen{t: Trace{Name: name, Ends: EndsDone}, rng: newRNG(seed)}
}

// at writes the queued events as one step at offset d.
func (g *gen) at(d time.Duration) {
	if len(g.pending) == 0 {
		return
	}
	if n := len(g.t.Steps); n > 0 && d < g.t.Steps[n-1].At {
		panic("traces: steps out of order in " + g.t.Name)
	}
	g.t.Steps = append(g.t.Steps, Step{At: d, Raw: g.pending})
	g.pending = nil
}

// encode returns `data: <json>\n\n`.
func encode(v any) []byte {
	var b bytes.Buffer
	b.WriteString("data: ")
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // compact JSON and "\n"
		panic(err)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// chunk queues a chunk with the given choices.
func (g *gen) chunk(choices ...choice) {
	c := chunk{ID: chunkID, Object: "chat.completion.chunk", Created: chunkCreated, Model: chunkModel, Choices: choices}
	if g.usageNull {
		c.Usage = jsonNull
	}
	g.pending = append(g.pending, encode(c)...)
}

// role queues the first chunk: role assistant, content "".
func (g *gen) role(index int) {
	empty := ""
	g.chunk(choice{Index: index, Delta: delta{Role: "assistant", Content: &empty}})
}

// text queues one content (or reasoning_content) delta of choice 0.
func (g *gen) text(reasoning bool, s string) { g.textOf(0, reasoning, s, nil) }

// textOf queues one text delta of a choice, with logprobs if not nil.
func (g *gen) textOf(index int, reasoning bool, s string, logprobs json.RawMessage) {
	d := delta{Content: &s}
	if reasoning {
		d = delta{ReasoningContent: &s}
		g.reasoning.WriteString(s)
		g.rTokens++
	} else {
		g.answer.WriteString(s)
		g.aTokens++
	}
	g.chunk(choice{Index: index, Delta: d, Logprobs: logprobs})
}

// inline queues a content delta of choice 0 whose text is raw, the
// inline form of rsn reasoning and ans answer text (raw holds them with
// the tags, or pieces of tags, around them).
func (g *gen) inline(raw, rsn, ans string) {
	d := delta{Content: &raw}
	g.reasoning.WriteString(rsn)
	g.answer.WriteString(ans)
	if ans != "" {
		g.aTokens++
	} else {
		g.rTokens++
	}
	g.chunk(choice{Delta: d})
}

// finish queues the finish chunk of a choice.
func (g *gen) finish(index int, reason string) {
	g.chunk(choice{Index: index, Delta: delta{}, FinishReason: &reason})
}

// usage queues the usage chunk ("choices":[]).
func (g *gen) usage() {
	var u usage
	u.PromptTokens = promptTokens
	u.CompletionTokens = g.rTokens + g.aTokens
	u.TotalTokens = promptTokens + u.CompletionTokens
	u.CompletionTokensDetails.ReasoningTokens = g.rTokens
	raw, err := json.Marshal(u)
	if err != nil {
		panic(err)
	}
	g.pending = append(g.pending, encode(chunk{
		ID: chunkID, Object: "chat.completion.chunk", Created: chunkCreated, Model: chunkModel,
		Choices: []choice{}, Usage: raw,
	})...)
}

// done queues data: [DONE].
func (g *gen) done() { g.pending = append(g.pending, "data: [DONE]\n\n"...) }

// end queues the normal ending (finish of choice 0, usage, [DONE]) and
// writes it at d.
func (g *gen) end(d time.Duration) {
	g.finish(0, "stop")
	g.usage()
	g.done()
	g.at(d)
}

// trace returns the finished trace.
func (g *gen) trace() Trace {
	if len(g.pending) > 0 {
		panic("traces: unwritten events in " + g.t.Name)
	}
	g.t.Reasoning = g.reasoning.String()
	g.t.Answer = g.answer.String()
	return g.t
}

// burst queues n tokens from vocab and writes them as parts steps spread
// evenly over spread, starting at start. It returns the time of the last
// step.
func (g *gen) burst(start, spread time.Duration, n, parts int, reasoning bool, vocab func(*rng) string) time.Duration {
	parts = max(1, min(parts, n))
	last := start
	for p := range parts {
		for range n*(p+1)/parts - n*p/parts {
			g.text(reasoning, vocab(g.rng))
		}
		last = start
		if parts > 1 {
			last = start + spread*time.Duration(p)/time.Duration(parts-1)
		}
		g.at(last)
	}
	return last
}

// steady writes n tokens one per step, every period from start; it
// returns the time of the last one.
func (g *gen) steady(start, period time.Duration, n int, reasoning bool, vocab func(*rng) string) time.Duration {
	t := start
	for i := range n {
		t = start + period*time.Duration(i)
		g.text(reasoning, vocab(g.rng))
		g.at(t)
	}
	return t
}

// Vocabularies. English words mixed with punctuation, JSON escapes and
// HTML-special characters.
var (
	englishWords = []string{
		" the", " relay", " stream", " model", " token", " answer", " because", " latency",
		" smooth", " pacing", " buffer", " client", " server", " event", " window", " first",
		" then", " we", " it", " is", " a", " of", " and", " to", " in", " that", " this",
		" with", " for", " on", " upstream", " reasoning", " quickly", " chunk", " data",
		"Let", " us", " check", " result", " value", " each", " when", " not", " every",
	}
	englishPunct = []string{
		",", ".", ":", ";", "?", "!", " (", ")", " \"", "\"", "'s", " -", "\n", "\n\n",
		" 42", " 3.14", " <b>", "</b>", " &", " \\", "\t", " 100%",
	}
	cjkPieces = []string{
		"你好", "推理", "模型", "数据", "流", "的", "是", "在", "中文", "文本", "，", "。",
		"日本語", "です", "ます", "これは", "テスト", "、", "「", "」", "한국어", "입니다",
		"平滑", "输出", "字符", "延迟",
	}
	emojiPieces = []string{
		"👨‍👩‍👧‍👦", "👩‍👩‍👦", "🏳️‍🌈", "🏴‍☠️", "🇯🇵", "🇺🇸", "🇫🇷", "👍🏽", "👋🏿", "👩🏾‍💻",
		"🧑‍🤝‍🧑", "❤️‍🔥", "🙂", "🚀", "e\u0301", "a\u0308", "n\u0303", " ", " ok", " 👀",
		"Z\u0351\u036b\u0343", // stacked combining marks
	}
	zwjRunPieces = []string{"👨‍👩‍👧‍👦", "👩‍❤️‍💋‍👨", "🧑🏽‍🚀", "👩🏻‍🤝‍👨🏿", "🏳️‍⚧️"}
)

func english(r *rng) string {
	if r.next()%100 < 80 {
		return englishWords[r.next()%uint64(len(englishWords))]
	}
	return englishPunct[r.next()%uint64(len(englishPunct))]
}

func cjk(r *rng) string { return cjkPieces[r.next()%uint64(len(cjkPieces))] }

// emoji returns an emoji or combining-mark piece; one in five is a long
// run of ZWJ sequences.
func emoji(r *rng) string {
	if r.next()%5 == 0 {
		var b strings.Builder
		for range 6 + r.next()%6 {
			b.WriteString(zwjRunPieces[r.next()%uint64(len(zwjRunPieces))])
		}
		return b.String()
	}
	return emojiPieces[r.next()%uint64(len(emojiPieces))]
}

const ms = time.Millisecond

// generate builds the trace set.
func generate() []Trace {
	return []Trace{
		genSteady("steady", 1, 40*ms, 75),
		genSteady("steady-fast", 2, 10*ms, 300),
		genBursts("bursts-300ms", 3, 300*ms, 10),
		genBursts("bursts-150ms", 4, 150*ms, 20),
		genReasoningClustered(),
		genReasoningThenAnswer(),
		genReasoningAnswer250(),
		genTaggedReasoning(),
		genOnOff(),
		genFinalDump(),
		genClusteredVocab("cjk", 8, cjk, 15, 250*ms, 12),
		genClusteredVocab("emoji-zwj", 9, emoji, 12, 300*ms, 10),
		genBase64(),
		genTools(),
		genLogprobs(),
		genN2(),
		genUsage(),
		genErrorMid(),
		genEOFNoDone(),
	}
}

// genSteady: one token per event every period.
func genSteady(name string, seed uint64, period time.Duration, n int) Trace {
	g := newGen(name, seed)
	g.role(0)
	g.at(0)
	last := g.steady(20*ms, period, n, false, english)
	g.end(last + period)
	return g.trace()
}

// genBursts: 20 tokens within 5 ms (4 reads) every period.
func genBursts(name string, seed uint64, period time.Duration, bursts int) Trace {
	g := newGen(name, seed)
	g.t.Clustered, g.t.Cadence = true, period
	g.role(0)
	g.at(0)
	var last time.Duration
	for b := range bursts {
		last = g.burst(50*ms+period*time.Duration(b), 5*ms, 20, 4, false, english)
	}
	g.end(last + period)
	return g.trace()
}

// genReasoningClustered is DeepSeek-like: reasoning in clusters of 30
// tokens every 600 ms, a 1.2 s silence, then the answer at 30 tokens/s.
func genReasoningClustered() Trace {
	g := newGen("reasoning-clustered", 5)
	g.t.Clustered, g.t.Cadence = true, 600*ms
	g.role(0)
	g.at(0)
	var last time.Duration
	for c := range 5 {
		last = g.burst(100*ms+600*ms*time.Duration(c), 10*ms, 30, 3, true, english)
	}
	last = g.steady(last+1200*ms, time.Second/30, 60, false, english)
	g.end(last + 40*ms)
	return g.trace()
}

// genReasoningThenAnswer: reasoning in 20-token bursts every 300 ms, and
// then, with no pause, the answer in the same bursts: where a pacer that
// holds reasoning long must hand over to the answer without dumping the
// reasoning it still holds.
func genReasoningThenAnswer() Trace {
	g := newGen("reasoning-then-answer", 12)
	g.t.Clustered, g.t.Cadence, g.t.LanesClustered = true, 300*ms, true
	g.role(0)
	g.at(0)
	var last time.Duration
	for b := range 12 {
		last = g.burst(50*ms+300*ms*time.Duration(b), 5*ms, 20, 4, b < 7, english)
	}
	g.end(last + 300*ms)
	return g.trace()
}

// genReasoningAnswer250: reasoning in 20-token bursts every 300 ms; then
// a burst in which the reasoning ends and the answer begins (17 reasoning
// tokens, then 3 of the answer: an upstream batches tokens whatever their
// channel, so the switch falls anywhere in a burst); then the answer in
// 20-token bursts every 250 ms. In split-reasoning the answer lane starts
// with a sliver of a burst, and with the cadence and rate the reasoning
// lane measured, which are not the answer's.
func genReasoningAnswer250() Trace {
	g := newGen("reasoning-answer-250ms", 17)
	g.t.Clustered, g.t.Cadence, g.t.LanesClustered = true, 300*ms, true
	g.role(0)
	g.at(0)
	for b := range 8 {
		g.burst(50*ms+300*ms*time.Duration(b), 5*ms, 20, 4, true, english)
	}
	// The switching burst, read in four pieces like the others.
	start := 50*ms + 300*ms*8
	for i := range 20 {
		g.text(i < 17, english(g.rng))
		if i%5 == 4 {
			g.at(start + 5*ms*time.Duration(i/5)/3)
		}
	}
	var last time.Duration
	for b := range 10 {
		last = g.burst(start+250*ms*time.Duration(b+1), 5*ms, 20, 4, false, english)
	}
	g.end(last + 250*ms)
	return g.trace()
}

// genTaggedReasoning is reasoning-answer-250ms's kind of stream from a
// model served without a reasoning parser: the reasoning inline in
// content between <think> and </think>, in 20-token bursts every 300 ms;
// a burst in which it ends and the answer begins; the answer in bursts
// every 300 ms. The tags are cut where a parser must hold bytes back:
// "<th" ends the first read of the first burst and "ink>" starts the
// next; "\n</th" ends a read of the switching burst and "ink>" starts
// the next. The newline after each tag is formatting, not text (see
// internal/thinktag); the one before </think> is reasoning. Reasoning
// and Answer are the text a relay with `reasoning_format tags` delivers.
func genTaggedReasoning() Trace {
	g := newGen("tagged-reasoning", 18)
	g.t.Clustered, g.t.Cadence, g.t.LanesClustered, g.t.Tagged = true, 300*ms, true, true
	g.role(0)
	g.at(0)
	read := func(b, r int) time.Duration { return 50*ms + 300*ms*time.Duration(b) + 5*ms*time.Duration(r)/3 }
	word := func(reasoning bool) {
		w := english(g.rng)
		if reasoning {
			g.inline(w, w, "")
		} else {
			g.inline(w, "", w)
		}
	}
	// The first burst: the opening tag cut between two reads.
	g.inline("<th", "", "")
	g.at(read(0, 0))
	g.inline("ink>\n", "", "")
	g.inline("Let", "Let", "")
	for i := range 17 {
		word(true)
		if i%6 == 5 {
			g.at(read(0, 1+i/6))
		}
	}
	g.at(read(0, 3))
	for b := 1; b < 7; b++ {
		for i := range 20 {
			word(true)
			if i%5 == 4 {
				g.at(read(b, i/5))
			}
		}
	}
	// The switching burst: the closing tag cut between two reads.
	for i := range 12 {
		word(true)
		if i%5 == 4 {
			g.at(read(7, i/5))
		}
	}
	g.inline("\n</th", "\n", "")
	g.at(read(7, 2))
	g.inline("ink>\n\nThe", "", "The")
	for range 5 {
		word(false)
	}
	g.at(read(7, 3))
	var last time.Duration
	for b := 8; b < 14; b++ {
		last = g.burst(read(b, 0), 5*ms, 20, 4, false, english)
	}
	g.end(last + 300*ms)
	return g.trace()
}

// genOnOff: three on-phases of bursts (20 tokens every 300 ms) separated
// by silences of 2.5 s and 4 s.
func genOnOff() Trace {
	g := newGen("onoff", 6)
	g.t.Clustered, g.t.Cadence = true, 300*ms
	g.role(0)
	g.at(0)
	t := 50 * ms
	var last time.Duration
	for _, silence := range []time.Duration{2500 * ms, 4000 * ms, 0} {
		for b := range 3 {
			last = g.burst(t+300*ms*time.Duration(b), 5*ms, 20, 4, false, english)
		}
		t = last + silence
	}
	g.end(last + 300*ms)
	return g.trace()
}

// genFinalDump: a 2 s silence, then the whole answer (~2000 characters)
// in one event, arriving together with finish, usage and [DONE].
func genFinalDump() Trace {
	g := newGen("final-dump", 7)
	g.role(0)
	g.at(0)
	var b strings.Builder
	for len([]rune(b.String())) < 2000 {
		b.WriteString(english(g.rng))
	}
	g.text(false, b.String())
	g.end(2000 * ms)
	return g.trace()
}

// genClusteredVocab: bursts of n tokens from vocab every period.
func genClusteredVocab(name string, seed uint64, vocab func(*rng) string, n int, period time.Duration, bursts int) Trace {
	g := newGen(name, seed)
	g.t.Clustered, g.t.Cadence = true, period
	g.role(0)
	g.at(0)
	var last time.Duration
	for b := range bursts {
		last = g.burst(50*ms+period*time.Duration(b), 5*ms, n, 3, false, vocab)
	}
	g.end(last + period)
	return g.trace()
}

// genBase64: a short intro, a 3000-character base64 run in four big
// events 200 ms apart, a short outro.
func genBase64() Trace {
	g := newGen("base64", 10)
	g.role(0)
	g.at(0)
	last := g.steady(20*ms, 40*ms, 8, false, english)
	raw := make([]byte, 2250)
	for i := range raw {
		raw[i] = byte(g.rng.next())
	}
	blob := base64.StdEncoding.EncodeToString(raw) // 3000 characters
	for i := range 4 {
		g.text(false, blob[i*750:(i+1)*750])
		last += 200 * ms
		g.at(last)
	}
	last = g.steady(last+40*ms, 40*ms, 8, false, english)
	g.end(last + 40*ms)
	return g.trace()
}

// genTools: text, then two tool calls whose arguments arrive in
// fragments, then more text; finish_reason tool_calls.
func genTools() Trace {
	g := newGen("tools", 11)
	g.role(0)
	g.at(0)
	t := g.steady(20*ms, 40*ms, 12, false, english)
	calls := []struct {
		id, name string
		args     []string
	}{
		{"call_trace_1", "get_weather", []string{`{"ci`, `ty": "Pa`, `ris", "un`, `its": "met`, `ric"}`}},
		{"call_trace_2", "lookup", []string{`{"query": "caf\u00e9 `, `<b> & \"quotes\"`, `", "limit": 3}`}},
	}
	for i, c := range calls {
		g.chunk(choice{Delta: delta{ToolCalls: []toolCall{{Index: i, ID: c.id, Type: "function", Function: toolFunc{Name: c.name}}}}})
		t += 40 * ms
		g.at(t)
		for _, a := range c.args {
			g.chunk(choice{Delta: delta{ToolCalls: []toolCall{{Index: i, Function: toolFunc{Arguments: a}}}}})
			t += 20 * ms
			g.at(t)
		}
	}
	t = g.steady(t+40*ms, 40*ms, 10, false, english)
	g.finish(0, "tool_calls")
	g.usage()
	g.done()
	g.at(t + 40*ms)
	return g.trace()
}

// genLogprobs: content chunks with logprobs, in bursts of 10 every 200 ms.
func genLogprobs() Trace {
	g := newGen("logprobs", 12)
	g.role(0)
	g.at(0)
	t := 50 * ms
	for b := range 8 {
		t = 50*ms + 200*ms*time.Duration(b)
		for range 10 {
			tok := english(g.rng)
			lp := -math.Round(g.rng.float()*40000) / 10000
			type top struct {
				Token   string  `json:"token"`
				Logprob float64 `json:"logprob"`
				Bytes   []int   `json:"bytes"`
			}
			entry := struct {
				top
				TopLogprobs []top `json:"top_logprobs"`
			}{top: top{tok, lp, bytesOf(tok)}, TopLogprobs: []top{{tok, lp, bytesOf(tok)}, {" x", lp - 1.5, bytesOf(" x")}}}
			raw, err := json.Marshal(struct {
				Content []any `json:"content"`
				Refusal *bool `json:"refusal"`
			}{Content: []any{entry}})
			if err != nil {
				panic(err)
			}
			g.textOf(0, false, tok, raw)
		}
		g.at(t)
	}
	g.end(t + 200*ms)
	return g.trace()
}

func bytesOf(s string) []int {
	out := []int{}
	for _, b := range []byte(s) {
		out = append(out, int(b))
	}
	return out
}

// genN2: two choices interleaved, one token each every 30 ms.
func genN2() Trace {
	g := newGen("n2", 13)
	g.role(0)
	g.role(1)
	g.at(0)
	t := 20 * ms
	for i := range 80 {
		t = 20*ms + 30*ms*time.Duration(i)
		g.textOf(i%2, false, english(g.rng), nil)
		g.at(t)
	}
	g.finish(0, "stop")
	g.finish(1, "stop")
	g.usage()
	g.done()
	g.at(t + 30*ms)
	return g.trace()
}

// genUsage: every chunk carries "usage":null, the last one the usage.
func genUsage() Trace {
	g := newGen("usage", 14)
	g.usageNull = true
	g.role(0)
	g.at(0)
	last := g.steady(20*ms, 50*ms, 40, false, english)
	g.finish(0, "stop")
	g.usageNull = false
	g.usage()
	g.done()
	g.at(last + 50*ms)
	return g.trace()
}

// genErrorMid: bursts, then an in-band error event, then EOF.
func genErrorMid() Trace {
	g := newGen("error-mid", 15)
	g.t.Ends = EndsError
	g.role(0)
	g.at(0)
	var last time.Duration
	for b := range 5 {
		last = g.burst(50*ms+300*ms*time.Duration(b), 5*ms, 15, 3, false, english)
	}
	g.pending = append(g.pending, `data: {"error":{"message":"overloaded","type":"server_error","code":"upstream_overloaded"}}`+"\n\n"...)
	g.at(last + 100*ms)
	return g.trace()
}

// genEOFNoDone: bursts, then a chunk cut off in the middle, then EOF.
func genEOFNoDone() Trace {
	g := newGen("eof-no-done", 16)
	g.t.Ends = EndsEOF
	g.role(0)
	g.at(0)
	var last time.Duration
	for b := range 5 {
		last = g.burst(50*ms+300*ms*time.Duration(b), 5*ms, 15, 3, false, english)
	}
	// The cut-off chunk is not part of the answer: build it aside.
	s := " truncated"
	cut := encode(chunk{ID: chunkID, Object: "chat.completion.chunk", Created: chunkCreated, Model: chunkModel,
		Choices: []choice{{Delta: delta{Content: &s}}}})
	g.pending = append(g.pending, cut[:bytes.Index(cut, []byte("trunc"))]...)
	g.at(last + 100*ms)
	return g.trace()
}

// rng is splitmix64, with a fixed algorithm so that traces never change
// across Go versions.
type rng struct{ state uint64 }

func newRNG(seed uint64) *rng {
	r := &rng{state: 0x9e3779b97f4a7c15 ^ seed}
	r.next()
	return r
}

func (r *rng) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float returns a uniform float64 in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }
