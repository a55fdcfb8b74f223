package chat

import (
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
)

// ChunkWriter writes the chat.completion.chunk data of one stream, for a
// translator into Chat: byte by byte in OpenAI's member order (no
// encoding/json on the hot path), each text chunk of the shape
// pace.Classify takes for text, so that the relay re-paces it. Every
// method returns the data in the writer's buffer, valid until its next
// call.
type ChunkWriter struct {
	id, model string
	created   int64
	head      []byte // `{"id":…,"choices":[` (see chunkHead)
	buf       []byte // the data being built
}

// Begin names the chunks that follow: their "id", "model" and "created".
func (w *ChunkWriter) Begin(id, model string, created int64) {
	w.id, w.model, w.created, w.head = id, model, created, nil
}

// Model is the "model" the chunks name.
func (w *ChunkWriter) Model() string { return w.model }

// chunkHead is `{"id":…,"object":"chat.completion.chunk","created":…,
// "model":…,"choices":[`, the start of every chunk, built once.
func (w *ChunkWriter) chunkHead() []byte {
	if w.head == nil {
		h := append([]byte(`{"id":`), pace.AppendString(nil, []byte(w.id))...)
		h = append(h, `,"object":"chat.completion.chunk","created":`...)
		h = strconv.AppendInt(h, w.created, 10)
		h = append(h, `,"model":`...)
		h = pace.AppendString(h, []byte(w.model))
		w.head = append(h, `,"choices":[`...)
	}
	return w.head
}

// openChoice starts a chunk in w.buf, up to the inside of the delta.
func (w *ChunkWriter) openChoice() {
	w.buf = append(append(w.buf[:0], w.chunkHead()...), `{"index":0,"delta":{`...)
}

// closeChoice ends the chunk in w.buf; finish "" is null.
func (w *ChunkWriter) closeChoice(finish string) []byte {
	w.buf = append(w.buf, `},"logprobs":null,"finish_reason":`...)
	if finish == "" {
		w.buf = append(w.buf, "null"...)
	} else {
		w.buf = pace.AppendString(w.buf, []byte(finish))
	}
	w.buf = append(w.buf, "}]}"...)
	return w.buf
}

// Role is the first chunk: the assistant role and empty content.
func (w *ChunkWriter) Role() []byte {
	w.openChoice()
	w.buf = append(w.buf, `"role":"assistant","content":""`...)
	return w.closeChoice("")
}

// Content is a chunk of text in the delta member field ("content",
// "reasoning_content" or "refusal").
func (w *ChunkWriter) Content(field string, text []byte) []byte {
	w.openChoice()
	w.buf = append(w.buf, '"')
	w.buf = append(w.buf, field...)
	w.buf = append(w.buf, `":`...)
	w.buf = pace.AppendString(w.buf, text)
	return w.closeChoice("")
}

// ToolCall is a tool call's first chunk (id != "" or args == nil: id,
// name, empty arguments) or a fragment of its arguments.
func (w *ChunkWriter) ToolCall(call int, id, name string, args []byte) []byte {
	w.openChoice()
	w.buf = append(w.buf, `"tool_calls":[{"index":`...)
	w.buf = strconv.AppendInt(w.buf, int64(call), 10)
	if id != "" || args == nil {
		w.buf = append(w.buf, `,"id":`...)
		w.buf = pace.AppendString(w.buf, []byte(id))
		w.buf = append(w.buf, `,"type":"function","function":{"name":`...)
		w.buf = pace.AppendString(w.buf, []byte(name))
		w.buf = append(w.buf, `,"arguments":""}}]`...)
	} else {
		w.buf = append(w.buf, `,"function":{"arguments":`...)
		w.buf = pace.AppendString(w.buf, args)
		w.buf = append(w.buf, "}}]"...)
	}
	return w.closeChoice("")
}

// Finish is the chunk of the finish_reason.
func (w *ChunkWriter) Finish(reason string) []byte {
	w.openChoice()
	return w.closeChoice(reason)
}

// ChunkUsage is what the usage chunk says.
type ChunkUsage struct {
	Prompt, Completion, Total int
	// Cached is prompt_tokens_details.cached_tokens, always written.
	Cached int
	// CacheCreation is written as cache_creation_input_tokens (Anthropic's
	// cache writes, so that they can be priced) when positive.
	CacheCreation int
	// Reasoning is completion_tokens_details.reasoning_tokens, written
	// when positive.
	Reasoning int
}

// Usage is the usage chunk: no choices, the usage object.
func (w *ChunkWriter) Usage(u ChunkUsage) []byte {
	b := append(w.buf[:0], w.chunkHead()...)
	b = append(b, `],"usage":`...)
	b = AppendUsage(b, u)
	w.buf = append(b, '}')
	return w.buf
}

// AppendUsage appends u as a Chat usage object.
func AppendUsage(b []byte, u ChunkUsage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Completion), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Total), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Cached), 10)
	b = append(b, '}')
	if u.Reasoning > 0 {
		b = append(b, `,"completion_tokens_details":{"reasoning_tokens":`...)
		b = strconv.AppendInt(b, int64(u.Reasoning), 10)
		b = append(b, '}')
	}
	if u.CacheCreation > 0 {
		b = append(b, `,"cache_creation_input_tokens":`...)
		b = strconv.AppendInt(b, int64(u.CacheCreation), 10)
	}
	return append(b, '}')
}

// Error is an in-band error chunk in OpenAI's shape (see ErrorBody), its
// param null.
func (w *ChunkWriter) Error(typ, code, msg string) []byte {
	b := append(w.buf[:0], `{"error":{"message":`...)
	b = pace.AppendString(b, []byte(msg))
	b = append(b, `,"type":`...)
	b = pace.AppendString(b, []byte(typ))
	b = append(b, `,"param":null,"code":`...)
	b = pace.AppendString(b, []byte(code))
	w.buf = append(b, "}}"...)
	return w.buf
}
