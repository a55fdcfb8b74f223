package gemini

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// FromChatStream translates a Chat Completions stream (chunks, then
// [DONE]) into a Gemini stream as streamGenerateContent?alt=sse writes it:
// data events, each a GenerateContentResponse with one candidate.
//
// Each text delta becomes a chunk of one text part at once, reasoning
// (reasoning_content or reasoning, or a content part of type thinking) a
// text part with thought: true, a refusal a text part. Every chunk names
// opt.Model as its modelVersion (the model the client named in its path;
// "" takes the Chat chunks') and opt.ID as its responseId ("" takes the
// Chat chunks' id). Nothing is written before the first content.
//
// Gemini sends a function call whole, in one part, while Chat streams its
// arguments in fragments: the calls are gathered (a fragment with an id
// goes to the call of that id, as Mistral sends calls without an index;
// one without, to the newest call of its index) and written at the end, each a functionCall part (id: the Chat
// id without the thought signature it carries, which goes back on the
// part) whose args are the whole arguments, checked to be a JSON object.
//
// A Gemini stream has no [DONE]: it ends on the chunk that carries the
// finishReason. So [DONE] becomes that chunk: the calls (or an empty text
// part, as Gemini ends a stream), the finishReason (GeminiFinishReason of
// the Chat stream's finish_reason, STOP when none came), and the
// usageMetadata of the Chat usage chunk when one came (Chat reports usage
// once, at the end; it is the total). An in-band error chunk becomes the
// error the @google/genai SDK raises in a stream (see StreamError). Both
// end the stream: the next call returns io.EOF. A chunk that cannot be
// translated faithfully (not JSON, a second choice, a member of the wrong
// type: see chat.ReadDelta) ends it with a *chat.UnreadableError after
// the events made before it. A stream that ends without [DONE] ends
// without a finishReason too (the relay reads that as truncation); src's
// errors, io.EOF included, are returned as they are once the events made
// before them are out. The returned Source forwards BeforeRead to src.
func FromChatStream(src sse.Source, opt chat.Options) sse.Source {
	// out sized for a short answer's events at once: it grows for more.
	return &geminiStream{Pump: sse.Pump{Src: src}, opt: opt, out: make([]byte, 0, 1024)}
}

// geminiStream is FromChatStream's state.
type geminiStream struct {
	sse.Pump
	opt chat.Options

	started  bool   // the chunks' id and model are known
	tail     []byte // `],"role":"model"},"index":0}],"modelVersion":…,"responseId":…}`, built once
	calls    []streamCall
	finish   string // the Chat finish_reason, "" until one came
	usage    chatUsageIn
	hasUsage bool // a usage chunk came: usage is its

	chunk     chatChunk   // the chunk being read, reused
	fastUsage chatUsageIn // the usage of the chunk being read
	// slowChunks counts the chunks json.Unmarshal read, memoHits those
	// memoText read, for the test that the usual ones take the hot paths.
	slowChunks, memoHits int

	delta chat.Delta    // the chunk's choices as ReadDelta reads them, its slices reused
	ft    fastTextDelta // the hot path's text delta (fastText)
	memo  struct {      // the last text delta, around its text (memoText)
		ok       bool
		thought  bool
		pre, suf []byte
	}
	scratch []byte // decoded text of the hot path
	out     []byte // the events being made (see push)
}

// streamCall is a tool call being gathered.
type streamCall struct {
	index    int
	id, name string
	args     []byte
}

// Next returns the next Gemini event.
func (s *geminiStream) Next() (sse.Event, error) { return s.Pull(s) }

// chatChunk is the part of a Chat chunk FromChatStream reads off its fast
// path; chat.ReadDelta reads the choices.
type chatChunk struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Model   string          `json:"model"`
	Choices json.RawMessage `json:"choices"`
	Usage   *chatUsageIn    `json:"usage"`
	Error   json.RawMessage `json:"error"`
	Message string          `json:"message"` // vLLM's {"object":"error","message":…}
}

// Handle translates one Chat chunk into s.Q.
func (s *geminiStream) Handle(ev *sse.Event) {
	s.out = s.out[:0] // the events made before are handed out
	if !ev.HasData {
		return // comments and data-less blocks: the relay sends its own keep-alives
	}
	if ev.IsDone() && ev.Type != "error" {
		s.done()
		return
	}
	if ev.Unterminated {
		return // cut anywhere: dropped, so the stream ends as truncated
	}
	if ev.Type != "error" && isBlank(ev.Data) {
		return
	}
	c := &s.chunk
	*c = chatChunk{}
	hasUsage, fast := false, false
	if ev.Type != "error" && s.started && !slowOnly {
		// Another text delta like the last (memoText).
		if text, thought, ok := s.memoText(ev.Data); ok {
			s.memoHits++
			s.text(thought, text)
			return
		}
	}
	if ev.Type != "error" {
		// The hot path (stream_gemini_fast.go).
		s.scratch = s.scratch[:0]
		hasUsage, fast = s.fastChunk(ev.Data, c, &s.fastUsage, s.started)
	}
	if fast && s.ft.ok {
		// A text delta (fastText): what the rest would make of it.
		if c.ID != "" || c.Model != "" || len(s.ft.text) > 0 {
			s.begin(c.ID, c.Model)
		}
		if hasUsage {
			s.usage, s.hasUsage = s.fastUsage, true
		}
		s.text(s.ft.thought, s.ft.text)
		if s.started && !hasUsage {
			s.remember(ev.Data)
		}
		return
	}
	if !fast {
		s.slowChunks++
		*c = chatChunk{}
		if err := json.Unmarshal(ev.Data, c); err != nil || !isJSONObject(ev.Data) {
			if _, ok := err.(*json.UnmarshalTypeError); (!ok || !isJSONObject(ev.Data)) && ev.Type != "error" {
				s.unreadable(ev, &chat.UnreadableError{Reason: "the chunk is not a JSON object"})
				return
			}
		}
		if ev.Type == "error" || !isNullOrAbsent(c.Error) || c.Object == "error" {
			s.fail(ev.Data)
			return
		}
		if c.Usage != nil {
			hasUsage, s.fastUsage = true, *c.Usage
		}
	}
	if err := chat.ReadDelta(c.Choices, &s.delta); err != nil {
		s.unreadable(ev, err)
		return
	}
	d := &s.delta
	if c.ID != "" || c.Model != "" || len(d.Pieces) > 0 || len(d.Calls) > 0 || d.Finish != "" {
		s.begin(c.ID, c.Model)
	}
	if hasUsage {
		s.usage, s.hasUsage = s.fastUsage, true
	}
	for _, p := range d.Pieces {
		s.text(p.Channel == chat.ChanReasoning, []byte(p.Text))
	}
	for _, cd := range d.Calls {
		s.call(&cd)
	}
	if d.Finish != "" {
		s.finish = d.Finish
	}
}

// call gathers a tool call fragment.
func (s *geminiStream) call(cd *chat.CallDelta) {
	var c *streamCall
	for i := len(s.calls) - 1; i >= 0; i-- {
		// A fragment with an id belongs to the call of that id (calls
		// without an index, told apart by ids on every fragment, may
		// interleave); one without, to the newest call of its index.
		if cd.ID != "" && s.calls[i].id == cd.ID || cd.ID == "" && s.calls[i].index == cd.Index {
			c = &s.calls[i]
			break
		}
	}
	if c == nil && cd.ID != "" {
		for i := len(s.calls) - 1; i >= 0; i-- {
			if s.calls[i].index == cd.Index && s.calls[i].id == "" {
				c = &s.calls[i] // the id came after the call's first fragment
				break
			}
		}
	}
	if c == nil {
		s.calls = append(s.calls, streamCall{index: cd.Index})
		c = &s.calls[len(s.calls)-1]
	}
	if c.id == "" {
		c.id = cd.ID
	}
	if c.name == "" {
		c.name = cd.Name
	}
	c.args = append(c.args, cd.Args...)
}

// begin names the chunks at the first Chat chunk that names anything.
func (s *geminiStream) begin(id, model string) {
	if s.started {
		return
	}
	s.started = true
	if s.opt.Model != "" {
		model = s.opt.Model
	}
	if s.opt.ID != "" {
		id = s.opt.ID
	}
	t := make([]byte, 0, 80+len(model)+len(id))
	t = append(t, `],"role":"model"},"index":0}],"modelVersion":`...)
	t = pace.AppendString(t, []byte(model))
	t = append(t, `,"responseId":`...)
	t = pace.AppendString(t, []byte(id))
	s.tail = append(t, '}')
}

// chunkHead starts every chunk, up to the inside of its parts array.
const chunkHead = `{"candidates":[{"content":{"parts":[`

// text emits a chunk of one text part; empty text says nothing.
func (s *geminiStream) text(thought bool, text []byte) {
	if len(text) == 0 {
		return
	}
	s.begin("", "")
	start := s.open()
	b := append(s.out, chunkHead...)
	b = append(b, `{"text":`...)
	b = pace.AppendString(b, text)
	if thought {
		b = append(b, `,"thought":true`...)
	}
	b = append(b, '}')
	s.out = append(b, s.tail...)
	s.push(start)
}

// done ends the stream at [DONE] with the chunk of the finishReason.
func (s *geminiStream) done() {
	s.begin("", "")
	start := s.open()
	b := append(s.out, chunkHead...)
	if len(s.calls) == 0 {
		b = append(b, `{"text":""}`...)
	}
	for i, c := range s.calls {
		p, err := callPart(c.id, c.name, string(c.args))
		if err != nil {
			s.unreadable(nil, &chat.UnreadableError{Reason: "tool call " + strconv.Itoa(i) + ": " + err.Error()})
			return
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, marshal(p)...)
	}
	b = append(b, `],"role":"model"},"finishReason":`...)
	b = pace.AppendString(b, []byte(GeminiFinishReason(s.finish)))
	b = append(b, `,"index":0}]`...)
	if s.hasUsage {
		u := &s.usage
		um := usageMetadata(u.PromptTokens, u.CompletionTokens, u.TotalTokens,
			max(u.PromptTokensDetails.CachedTokens, u.PromptCacheHitTokens), u.CompletionTokensDetails.ReasoningTokens)
		b = append(b, `,"usageMetadata":`...)
		b = appendUsage(b, um)
	}
	// The tail's modelVersion and responseId, after the candidates.
	i := bytes.Index(s.tail, []byte(`,"modelVersion"`))
	s.out = append(b, s.tail[i:]...)
	s.push(start)
	s.Err = io.EOF
}

// fail turns an in-band error chunk into the error a Gemini client
// raises, and ends the stream.
func (s *geminiStream) fail(data []byte) {
	e := readError(data)
	code := StatusCode(e.Status)
	if code == 0 {
		code = statusOfChatError(data)
	}
	msg := e.Message
	if msg == "" {
		msg = "upstream stream error"
	}
	s.Q.Push(StreamError(code, msg))
	s.Err = io.EOF
}

// statusOfChatError is the HTTP status an OpenAI-style in-band error
// stands for, by its type or code: 500 when it names none.
func statusOfChatError(data []byte) int {
	var e struct {
		Error struct {
			Type string          `json:"type"`
			Code json.RawMessage `json:"code"`
		} `json:"error"`
		Type string `json:"type"`
	}
	_ = json.Unmarshal(data, &e)
	var code string
	_ = json.Unmarshal(e.Error.Code, &code)
	for _, t := range []string{code, e.Error.Type, e.Type} {
		switch t {
		case "invalid_request_error", "context_length_exceeded":
			return 400
		case "authentication_error":
			return 401
		case "permission_error":
			return 403
		case "not_found_error":
			return 404
		case "rate_limit_error", "rate_limit_exceeded", "insufficient_quota":
			return 429
		case "overloaded_error", "service_unavailable":
			return 503
		case "timeout_error":
			return 504
		}
	}
	return 500
}

// StreamError is the in-band error of a Gemini stream after the commit
// point, as the @google/genai SDK raises it: its stream reader
// (ApiClient.processStreamResponse) takes a network read that parses
// whole as JSON with an "error" member for an ApiError of that code, and
// passes over data events whatever they say. So the event's Raw is the
// bare ErrorBody, {"error":{"code","message","status"}}, and a newline:
// not an SSE block on purpose. Flushed on its own, it is that read; read
// together with an event before it, it is left over at the end of the
// stream, which the SDK raises as an incomplete JSON segment, so either
// way the client sees an error and not a cut answer. Its Type is "error"
// and its Data the JSON, for the relay's own end-of-stream rules.
func StreamError(code int, message string) sse.Event {
	body := GeminiError(code, message)
	raw := append(body, '\n')
	return sse.Event{Raw: raw, Type: "error", Data: raw[:len(body)], HasData: true, Retry: -1}
}

// unreadable ends the stream with err once the events made before it are
// out.
func (s *geminiStream) unreadable(ev *sse.Event, err error) {
	if ue, ok := err.(*chat.UnreadableError); ok && ev != nil && ue.Event == "" {
		ue.Event = ev.Type
	}
	if s.Err == nil {
		s.Err = err
	}
}

// The events are written in s.out, one after the other, as
// streamEvents.Event would write each (the same Event), without an
// allocation each: open starts one, push ends it and queues it. s.out is
// reused from the next Handle on, when the events before are handed out
// (an event is valid until the next call to Next, as a Reader's).

// open starts an event at the end of s.out; its data follows.
func (s *geminiStream) open() (start int) {
	start = len(s.out)
	s.out = append(s.out, dataPrefix...)
	return start
}

// push ends the event opened at start and queues it.
func (s *geminiStream) push(start int) {
	n := start + len(dataPrefix)
	end := len(s.out)
	s.out = append(s.out, '\n', '\n')
	ev := streamEvents[""]
	ev.Raw = s.out[start:len(s.out):len(s.out)]
	ev.Data = s.out[n:end:end]
	s.Q.Push(ev)
}

// dataPrefix starts a data event as streamEvents writes it.
var dataPrefix = func() []byte {
	raw := streamEvents[""].Raw
	return raw[:len(raw)-2] // "data: " without the block's end
}()

// appendUsage appends u as marshal writes it (each count omitted when 0),
// without encoding/json's reflection.
func appendUsage(b []byte, u UsageMetadata) []byte {
	b = append(b, '{')
	first := true
	for _, f := range [...]struct {
		name string
		n    int
	}{
		{`"promptTokenCount":`, u.PromptTokenCount},
		{`"candidatesTokenCount":`, u.CandidatesTokenCount},
		{`"totalTokenCount":`, u.TotalTokenCount},
		{`"cachedContentTokenCount":`, u.CachedContentTokenCount},
		{`"toolUsePromptTokenCount":`, u.ToolUsePromptTokenCount},
		{`"thoughtsTokenCount":`, u.ThoughtsTokenCount},
	} {
		if f.n == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, f.name...)
		b = strconv.AppendInt(b, int64(f.n), 10)
	}
	return append(b, '}')
}
