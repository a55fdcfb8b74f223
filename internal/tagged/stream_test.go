package tagged

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// Streams as the servers that write inline reasoning send them: one
// envelope for every delta of a stream (vLLM's shape below), a first
// chunk with the role, a finish chunk, a usage chunk, [DONE].

const (
	chunkID = "chatcmpl-9f2c1e7a3b5d4c6e8f0a1b2c3d4e5f60"
	created = 1718000000
	model   = "Qwen/Qwen3-8B"
)

// vllmDelta is a content delta of choice 0 in vLLM's envelope.
func vllmDelta(content []byte) string {
	return deltaWith(`"content":` + string(pace.AppendString(nil, content)))
}

// deltaWith is a chunk of choice 0 whose delta members are members.
func deltaWith(members string) string {
	return fmt.Sprintf(`{"id":%q,"object":"chat.completion.chunk","created":%d,"model":%q,"choices":[{"index":0,"delta":{%s},"logprobs":null,"finish_reason":null}]}`,
		chunkID, created, model, members)
}

// finishChunk is the chunk with choice 0's finish_reason and no text.
func finishChunk(reason string) string {
	return fmt.Sprintf(`{"id":%q,"object":"chat.completion.chunk","created":%d,"model":%q,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":%q,"stop_reason":null}]}`,
		chunkID, created, model, reason)
}

// usageChunk is the last chunk of a stream with include_usage.
func usageChunk() string {
	return fmt.Sprintf(`{"id":%q,"object":"chat.completion.chunk","created":%d,"model":%q,"choices":[],"usage":{"prompt_tokens":12,"total_tokens":80,"completion_tokens":68}}`,
		chunkID, created, model)
}

// sseData is one SSE block of data.
func sseData(data string) string { return "data: " + data + "\n\n" }

// streamOf is a whole stream: the role chunk, one content delta per
// piece, the finish chunk, the usage chunk and [DONE].
func streamOf(pieces [][]byte) string {
	var b strings.Builder
	b.WriteString(sseData(deltaWith(`"role":"assistant","content":""`)))
	for _, p := range pieces {
		b.WriteString(sseData(vllmDelta(p)))
	}
	b.WriteString(sseData(finishChunk("stop")))
	b.WriteString(sseData(usageChunk()))
	b.WriteString(sseData("[DONE]"))
	return b.String()
}

// cut is text cut at the offsets cuts (sorted, repeats allowed).
func cut(text []byte, cuts []int) [][]byte {
	var out [][]byte
	at := 0
	for _, c := range cuts {
		out = append(out, text[at:c])
		at = c
	}
	return append(out, text[at:])
}

// outEvent is one event of a rewritten stream, copied.
type outEvent struct {
	raw, data []byte
	done      bool
}

// runSource reads the whole of src through a Source and returns its
// events (copied) and the error that ended it.
func runSource(t testing.TB, in string, syn *thinktag.Syntax, field string) ([]outEvent, *Source, error) {
	t.Helper()
	s := NewSource(sse.NewReader(strings.NewReader(in), 0), syn, field)
	var out []outEvent
	for {
		ev, err := s.Next()
		if err != nil {
			return out, s, err
		}
		out = append(out, outEvent{raw: bytes.Clone(ev.Raw), data: bytes.Clone(ev.Data), done: ev.IsDone()})
		if len(out) > 100000 {
			t.Fatal("endless stream")
		}
	}
}

// rawOut is the output stream's bytes.
func rawOut(evs []outEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		b.Write(ev.raw)
	}
	return b.String()
}

// textsOf is what a stream's events carry in choice 0's delta, decoded
// byte for byte (invalid UTF-8 kept).
type texts struct {
	content, reasoning []byte
	other              []byte // the other reasoning field's text
}

var errNotJSON = fmt.Errorf("not JSON")

// choiceTexts decodes the delta texts of choice 0 in data.
func choiceTexts(data []byte, field string, into *texts) error {
	if !json.Valid(data) {
		return errNotJSON
	}
	var top struct {
		Choices []struct {
			Index *int                       `json:"index"`
			Delta map[string]json.RawMessage `json:"delta"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return nil // not a chunk: carries nothing
	}
	for _, ch := range top.Choices {
		if ch.Index != nil && *ch.Index != 0 {
			continue
		}
		for k, v := range ch.Delta {
			if len(v) == 0 || v[0] != '"' {
				continue
			}
			s, ok := rawString(v)
			if !ok {
				return fmt.Errorf("bad string %s", v)
			}
			switch k {
			case "content":
				into.content = append(into.content, s...)
			case field:
				into.reasoning = append(into.reasoning, s...)
			case chat.FieldReasoning, chat.FieldReasoningContent:
				into.other = append(into.other, s...)
			}
		}
	}
	return nil
}

// loopReader is an endless stream: head once, then body over and over,
// one event per Read (as tokens trickle in).
type loopReader struct {
	head, body string
	off        int
	inBody     bool
}

func (l *loopReader) Read(p []byte) (int, error) {
	src := l.head
	if l.inBody {
		src = l.body
	}
	if l.off == len(src) {
		l.off, l.inBody, src = 0, true, l.body
	}
	end := len(src)
	if i := strings.Index(src[l.off:], "\n\n"); i >= 0 {
		end = l.off + i + 2
	}
	n := copy(p, src[l.off:end])
	l.off += n
	return n, nil
}

var _ io.Reader = (*loopReader)(nil)

// rawString decodes a JSON string literal keeping invalid UTF-8 bytes as
// they are (encoding/json would make each a U+FFFD): a stream cut inside
// a character carries such bytes, and its text must come out whole.
func rawString(lit []byte) ([]byte, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return nil, false
	}
	s := lit[1 : len(lit)-1]
	out := []byte{}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+1 >= len(s) {
			return nil, false
		}
		i++
		switch s[i] {
		case '"', '\\', '/':
			out = append(out, s[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if i+5 > len(s) {
				return nil, false
			}
			r, err := strconv.ParseUint(string(s[i+1:i+5]), 16, 16)
			if err != nil {
				return nil, false
			}
			i += 4
			if utf16.IsSurrogate(rune(r)) && i+7 <= len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				r2, err := strconv.ParseUint(string(s[i+3:i+7]), 16, 16)
				if err == nil {
					if d := utf16.DecodeRune(rune(r), rune(r2)); d != utf8.RuneError {
						out = utf8.AppendRune(out, d)
						i += 6
						continue
					}
				}
			}
			out = utf8.AppendRune(out, rune(r)) // a lone surrogate: U+FFFD
		default:
			return nil, false
		}
	}
	return out, true
}
