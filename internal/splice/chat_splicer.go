package splice

import (
	"bytes"
	"slices"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// chatSplicer rewrites a continuation's Chat stream into the rest of the
// first. Every chunk it reads (a JSON object) is written again, member by
// member: the first stream's id, created, model and system_fingerprint
// (when it had them) in place of the continuation's; Options.Earlier
// added to a usage object; in a chunk with one choice that chat.ReadDelta
// reads, the delta's text members written anew (content as a string,
// reasoning in the first stream's member) without the role the client
// already had, and the chunk dropped when nothing is left of it. Its
// other members (tool_calls with their indices, finish_reason, logprobs,
// a provider's own) pass as they came. Comments, [DONE], error events and
// data that is not a JSON object pass unchanged.
type chatSplicer struct {
	cs            *chatSeam
	o             Options
	keepReasoning bool // the break fell in the reasoning, and Mark
	markerDue     bool
	roleSent      bool
	begun         bool // the first Next has run (the comment went out)

	// pending: the continuation's leading answer text is held in held
	// (its text pendText) until Decided says the overlap stands.
	pending  bool
	pendText string
	held     []*chatChunk

	c     chatChunk  // the chunk being read, reused
	d     chat.Delta // ReadDelta's
	buf   []byte     // the blocks built by this call of Next
	items []chatItem
	out   []sse.Event
}

// chatItem is one event Next returns: a passed event, or a block built
// in buf.
type chatItem struct {
	ev         sse.Event
	start, end int
	kind       uint8
}

const (
	itemPass = iota
	itemData
	itemComment
)

func newChatSplicer(cs *chatSeam, inReasoning bool, o Options) Splicer {
	s := &chatSplicer{cs: cs, o: o, roleSent: cs.role}
	s.keepReasoning = inReasoning && o.Reasoning == Mark
	s.markerDue = s.keepReasoning
	s.pending = !inReasoning && cs.answer != "" && o.MaxOverlap >= 0
	return s
}

func (s *chatSplicer) Next(ev sse.Event) []sse.Event {
	s.buf, s.items = s.buf[:0], s.items[:0]
	if !s.begun {
		s.begun = true
		if s.o.Comment != "" {
			start := len(s.buf)
			s.buf = sse.AppendComment(s.buf, s.o.Comment)
			s.items = append(s.items, chatItem{start: start, end: len(s.buf), kind: itemComment})
		}
	}
	switch {
	case ev.IsComment():
		s.pass(ev)
	case !ev.HasData || ev.Type == "error" || ev.IsDone():
		s.other(ev)
	default:
		s.chunk(ev)
	}
	s.out = s.out[:0]
	for _, it := range s.items {
		switch it.kind {
		case itemData:
			s.out = append(s.out, sse.DataEvent(s.buf[it.start:it.end]))
		case itemComment:
			s.out = append(s.out, sse.Event{Raw: s.buf[it.start:it.end], Retry: -1})
		default:
			s.out = append(s.out, it.ev)
		}
	}
	return s.out
}

func (s *chatSplicer) pass(ev sse.Event) { s.items = append(s.items, chatItem{ev: ev}) }

// other passes an event that is no chunk to rewrite, after the text held
// for the overlap and the marker.
func (s *chatSplicer) other(ev sse.Event) {
	s.release()
	s.marker()
	s.pass(ev)
}

func (s *chatSplicer) chunk(ev sse.Event) {
	c := &s.c
	if !c.parse(ev.Data, &s.d) || c.at[topError] >= 0 && !jsonscan.IsNull(c.data, c.top[c.at[topError]].vs) {
		s.other(ev)
		return
	}
	if !s.keepReasoning {
		c.reasoning = "" // Hide, or the answer had begun
	}
	if s.pending && c.one {
		switch {
		case c.content != "":
			s.hold(c)
			if c.finish || c.calls || c.usage || c.refusal != "" || Decided(s.cs.answer, s.pendText, s.o.MaxOverlap) {
				s.release()
			}
			return
		case s.empty(c):
			return
		case s.roleOnly(c):
			s.emit(c) // a role chunk: the overlap is still open
			return
		}
	}
	s.release()
	s.emit(c)
}

// hold keeps a copy of c (its text part of the overlap being decided).
func (s *chatSplicer) hold(c *chatChunk) {
	h := *c
	h.data = bytes.Clone(c.data)
	h.top, h.choice, h.delta = slices.Clone(c.top), slices.Clone(c.choice), slices.Clone(c.delta)
	s.held = append(s.held, &h)
	s.pendText += c.content
}

// release ends the overlap: the repeat of the seam's tail is cut from
// the held text, and what is left of the held chunks goes out.
func (s *chatSplicer) release() {
	if !s.pending {
		return
	}
	s.pending = false
	n := Overlap(s.cs.answer, s.pendText, s.o.MaxOverlap)
	for _, h := range s.held {
		cut := min(n, len(h.content))
		h.content, n = h.content[cut:], n-cut
		s.emit(h)
	}
	s.held, s.pendText = nil, ""
}

func (s *chatSplicer) keepsRole(c *chatChunk) bool { return c.roleAt >= 0 && !s.roleSent }

// empty: c has one choice that carries nothing the client lacks.
func (s *chatSplicer) empty(c *chatChunk) bool {
	return c.one && !s.keepsRole(c) && c.content == "" && c.reasoning == "" && c.refusal == "" && !c.calls && !c.finish && !c.usage
}

func (s *chatSplicer) roleOnly(c *chatChunk) bool {
	return c.one && s.keepsRole(c) && c.content == "" && c.reasoning == "" && c.refusal == "" && !c.calls && !c.finish && !c.usage
}

// emit writes c, unless nothing is left of it, with the marker before it
// (after it when c is the client's first role chunk).
func (s *chatSplicer) emit(c *chatChunk) {
	if s.empty(c) {
		return
	}
	keepRole := s.keepsRole(c)
	if !keepRole {
		s.marker()
	}
	s.render(c, keepRole)
	s.roleSent = s.roleSent || keepRole
	s.marker()
}

// marker writes the chunk of Marker on the first stream's reasoning
// member, once, when due.
func (s *chatSplicer) marker() {
	if !s.markerDue {
		return
	}
	s.markerDue = false
	h := &s.cs.head
	start := len(s.buf)
	b := append(s.buf, `data: {"id":`...)
	b = append(b, or(h.id, `""`)...)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = append(b, or(h.created, `0`)...)
	b = append(b, `,"model":`...)
	b = append(b, or(h.model, `""`)...)
	if h.fingerprint != nil {
		b = append(b, `,"system_fingerprint":`...)
		b = append(b, h.fingerprint...)
	}
	b = append(b, `,"choices":[{"index":0,"delta":{`...)
	first := true
	b = appendTexts(b, &first, s.cs.style, Marker, "", "")
	b = append(b, `},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	s.buf = b
	s.items = append(s.items, chatItem{start: start, end: len(b), kind: itemData})
}

// member is the head's value of the top-level member k (nil: none).
func (h *chatHead) member(k int) []byte {
	switch k {
	case topID:
		return h.id
	case topCreated:
		return h.created
	case topModel:
		return h.model
	case topFingerprint:
		return h.fingerprint
	}
	return nil
}

func or(v []byte, def string) []byte {
	if v == nil {
		return []byte(def)
	}
	return v
}

// render writes c as a data block: the first stream's head (the members
// c lacks: id, created and model first, system_fingerprint last), the
// usage with the earlier attempts', the one choice's delta written anew.
func (s *chatSplicer) render(c *chatChunk, keepRole bool) {
	start := len(s.buf)
	b := append(s.buf, "data: {"...)
	first := true
	h := &s.cs.head
	for _, k := range [...]int{topID, topCreated, topModel} {
		if hv := h.member(k); hv != nil && c.at[k] < 0 {
			b = appendKey(b, &first, `"`+topKeys[k]+`"`)
			b = append(b, hv...)
		}
	}
	data := c.data
	for _, m := range c.top {
		b = appendKey(b, &first, data[m.ks:m.ke])
		v := data[m.vs:m.ve]
		switch k := jsonscan.MatchKey(data[m.ks:m.ke], topKeys); k {
		case topID, topCreated, topModel, topFingerprint:
			if hv := h.member(k); hv != nil {
				v = hv
			}
		case topUsage:
			if v[0] == '{' {
				b = appendUsage(b, v, s.o.Earlier)
				continue
			}
		case topChoices:
			if c.one {
				b = s.appendChoice(b, c, keepRole)
				continue
			}
		}
		b = append(b, v...)
	}
	if h.fingerprint != nil && c.at[topFingerprint] < 0 {
		b = appendKey(b, &first, `"system_fingerprint"`)
		b = append(b, h.fingerprint...)
	}
	b = append(b, "}\n\n"...)
	// A chunk is one data line: a line break in it can only be white
	// space between tokens (JSON strings escape theirs).
	for i := start + len("data: "); i < len(b)-2; i++ {
		if b[i] == '\n' || b[i] == '\r' {
			b[i] = ' '
		}
	}
	s.buf = b
	s.items = append(s.items, chatItem{start: start, end: len(b), kind: itemData})
}

// appendChoice writes c's choices: its one choice with its delta anew.
func (s *chatSplicer) appendChoice(b []byte, c *chatChunk, keepRole bool) []byte {
	data := c.data
	b = append(b, "[{"...)
	first := true
	for n, m := range c.choice {
		b = appendKey(b, &first, data[m.ks:m.ke])
		if n != c.deltaAt {
			b = append(b, data[m.vs:m.ve]...)
			continue
		}
		b = append(b, '{')
		dfirst := true
		if keepRole {
			r := c.delta[c.roleAt]
			b = appendKey(b, &dfirst, data[r.ks:r.ke])
			b = append(b, data[r.vs:r.ve]...)
		}
		b = appendTexts(b, &dfirst, s.cs.style, c.reasoning, c.content, c.refusal)
		for _, dm := range c.delta {
			if jsonscan.MatchKey(data[dm.ks:dm.ke], deltaKeys) >= 0 {
				continue // written above, or dropped
			}
			b = appendKey(b, &dfirst, data[dm.ks:dm.ke])
			b = append(b, data[dm.vs:dm.ve]...)
		}
		b = append(b, '}')
	}
	return append(b, "}]"...)
}

// appendTexts writes a delta's text members: the reasoning in style, the
// content as a string (in Mistral's parts beside thinking), the refusal.
func appendTexts(b []byte, first *bool, style reasoningStyle, reasoning, content, refusal string) []byte {
	switch {
	case reasoning == "":
	case style == styleThinking:
		b = appendKey(b, first, `"content"`)
		b = append(b, `[{"type":"thinking","thinking":[{"type":"text","text":`...)
		b = pace.AppendString(b, []byte(reasoning))
		b = append(b, "}]}"...)
		if content != "" {
			b = append(b, `,{"type":"text","text":`...)
			b = pace.AppendString(b, []byte(content))
			b = append(b, '}')
		}
		b = append(b, ']')
		content = ""
	case style == styleReasoning:
		b = appendKey(b, first, `"reasoning"`)
		b = pace.AppendString(b, []byte(reasoning))
	default:
		b = appendKey(b, first, `"reasoning_content"`)
		b = pace.AppendString(b, []byte(reasoning))
	}
	if content != "" {
		b = appendKey(b, first, `"content"`)
		b = pace.AppendString(b, []byte(content))
	}
	if refusal != "" {
		b = appendKey(b, first, `"refusal"`)
		b = pace.AppendString(b, []byte(refusal))
	}
	return b
}

// appendKey writes a member's key literal and colon, after a comma but
// for the first.
func appendKey[S ~string | ~[]byte](b []byte, first *bool, lit S) []byte {
	if !*first {
		b = append(b, ',')
	}
	*first = false
	b = append(b, lit...)
	return append(b, ':')
}

// counter is a usage member that the earlier attempts' counts are added
// to: a number (n), or an object of counters (sub). ifPresent: a
// provider's own member, added to only when the chunk has it.
type counter struct {
	key       string
	n         int
	sub       []counter
	ifPresent bool
}

func (c counter) nonzero() bool {
	if c.n != 0 {
		return true
	}
	for _, s := range c.sub {
		if s.nonzero() {
			return true
		}
	}
	return false
}

// appendUsage writes the usage object v with e added: prompt_tokens,
// completion_tokens, total_tokens, prompt_tokens_details.cached_tokens,
// completion_tokens_details.reasoning_tokens (each added when missing
// and e has some), and DeepSeek's prompt_cache_hit_tokens and
// prompt_cache_miss_tokens when the chunk has them.
func appendUsage(b, v []byte, e usage.Usage) []byte {
	if e == (usage.Usage{}) {
		return append(b, v...)
	}
	return appendCounted(b, v, []counter{
		{key: `"prompt_tokens"`, n: e.Prompt},
		{key: `"completion_tokens"`, n: e.Completion},
		{key: `"total_tokens"`, n: e.Total()},
		{key: `"prompt_tokens_details"`, sub: []counter{{key: `"cached_tokens"`, n: e.Cached}}},
		{key: `"completion_tokens_details"`, sub: []counter{{key: `"reasoning_tokens"`, n: e.Reasoning}}},
		{key: `"prompt_cache_hit_tokens"`, n: e.Cached, ifPresent: true},
		{key: `"prompt_cache_miss_tokens"`, n: e.Prompt - e.Cached, ifPresent: true},
	})
}

// appendCounted writes the object v with cs added to its members (v
// unchanged when it is not an object; a member that is not an integer
// unchanged).
func appendCounted(b, v []byte, cs []counter) []byte {
	ms, end := members(v, jsonscan.SkipWS(v, 0), 1, nil)
	if end < 0 {
		return append(b, v...)
	}
	b = append(b, '{')
	first := true
	var seen uint64
	for _, m := range ms {
		key, val := v[m.ks:m.ke], v[m.vs:m.ve]
		b = appendKey(b, &first, key)
		k := slices.IndexFunc(cs, func(c counter) bool { return c.key == string(key) })
		if k < 0 || seen&(1<<k) != 0 {
			b = append(b, val...)
			continue
		}
		seen |= 1 << k
		c := cs[k]
		switch {
		case c.sub != nil && val[0] == '{':
			b = appendCounted(b, val, c.sub)
		case c.sub != nil && jsonscan.IsNull(val, 0) && c.nonzero():
			b = appendNew(b, c.sub)
		case c.sub == nil:
			if n, err := strconv.ParseInt(string(val), 10, 64); err == nil {
				b = strconv.AppendInt(b, n+int64(c.n), 10)
			} else {
				b = append(b, val...)
			}
		default:
			b = append(b, val...)
		}
	}
	for k, c := range cs {
		if seen&(1<<k) != 0 || c.ifPresent || !c.nonzero() {
			continue
		}
		b = appendKey(b, &first, c.key)
		if c.sub != nil {
			b = appendNew(b, c.sub)
		} else {
			b = strconv.AppendInt(b, int64(c.n), 10)
		}
	}
	return append(b, '}')
}

// appendNew writes an object of the counters that are not zero.
func appendNew(b []byte, cs []counter) []byte {
	return appendCounted(b, []byte("{}"), cs)
}
