package llmrelay

import (
	"bytes"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
)

// reasoningOutput writes a Chat client's stream with its reasoning in the
// form reasoning_field both or inline asks for. It sits after the pacer,
// which paces one reasoning field on its lane: both names at once would be
// neither a reasoning nor an answer delta to it, and inline reasoning
// would be answer text. Each block the pacer writes (it writes whole
// blocks, "data: " and one line of JSON) is rewritten on its way to the
// client; comments, [DONE] and anything else pass as they are.
type reasoningOutput struct {
	out  pace.Output
	mode string // chat.ReasoningBoth or chat.ReasoningInline
	in   chat.Inliner
	part []byte // the start of a block whose end has not been written yet
	buf  []byte
}

// withReasoningOutput wraps out when field asks for a form written on the
// way out (see exchange.renames).
func withReasoningOutput(out pace.Output, field string) pace.Output {
	if field != chat.ReasoningBoth && field != chat.ReasoningInline {
		return out
	}
	return &reasoningOutput{out: out, mode: field}
}

func (r *reasoningOutput) Write(p []byte) (int, error) {
	n := len(p)
	if len(r.part) > 0 {
		r.part = append(r.part, p...)
		p = r.part
	}
	r.buf = r.buf[:0]
	for {
		end := bytes.Index(p, []byte("\n\n"))
		if end < 0 {
			break
		}
		r.buf = r.block(r.buf, p[:end+2])
		p = p[end+2:]
	}
	r.part = append(r.part[:0], p...)
	if len(r.buf) == 0 {
		return n, nil
	}
	if _, err := r.out.Write(r.buf); err != nil {
		return 0, err
	}
	return n, nil
}

// block appends one whole block, rewritten if it is a chunk with
// reasoning (or, inline, one that closes a block of it).
func (r *reasoningOutput) block(dst, b []byte) []byte {
	const prefix = "data: "
	data := b[:len(b)-2]
	if !bytes.HasPrefix(data, []byte(prefix)) || bytes.IndexByte(data, '\n') >= 0 {
		return append(dst, b...)
	}
	data = data[len(prefix):]
	var out []byte
	var changed bool
	if r.mode == chat.ReasoningBoth {
		out, changed = chat.DuplicateReasoning(data)
	} else {
		out, changed = r.in.Chunk(data)
	}
	if !changed {
		return append(dst, b...)
	}
	dst = append(dst, prefix...)
	dst = append(dst, out...)
	return append(dst, '\n', '\n')
}

// Flush writes a block still incomplete as it is, and flushes: the pacer
// writes whole blocks, so only an upstream's odd last bytes (mode off's
// tail) are ever held at a flush, and they are passed on rather than kept
// from the client.
func (r *reasoningOutput) Flush() error {
	if len(r.part) > 0 {
		if _, err := r.out.Write(r.part); err != nil {
			return err
		}
		r.part = r.part[:0]
	}
	return r.out.Flush()
}
