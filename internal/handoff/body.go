package handoff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
)

// Dialect is the wire format of a client's request body.
type Dialect uint8

const (
	Chat      Dialect = iota // OpenAI Chat Completions: messages
	Messages                 // Anthropic Messages: messages and system
	Responses                // OpenAI Responses: input and instructions
)

// Inject is where the answer leg's request carries the reasoning.
type Inject uint8

const (
	// Prefill is a trailing assistant turn that opens with the reasoning
	// in a <think> wrapper: the model continues it with the answer.
	// Anthropic continues a trailing assistant turn; most Chat providers
	// need their own switch for it (vLLM's continue_final_message).
	Prefill Inject = iota
	// User appends the reasoning, under Preamble, to the last user turn
	// (a new user turn when the conversation ends with tool results).
	User
	// System appends it, under Preamble, to the system prompt. A provider's
	// prompt cache then misses for the whole conversation after it.
	System
)

func (i Inject) String() string {
	switch i {
	case User:
		return "user"
	case System:
		return "system"
	}
	return "prefill"
}

// ParseInject reads an `inject` value.
func ParseInject(s string) (Inject, bool) {
	switch s {
	case "prefill":
		return Prefill, true
	case "user":
		return User, true
	case "system":
		return System, true
	}
	return 0, false
}

// Preamble introduces the reasoning where it is not the model's own turn
// (User and System). It says what the text is and what to do with it, and
// nothing a model could mistake for the user's question.
const Preamble = "The reasoning below was written for this request by another model. Use it to write your answer; do not repeat it or mention it.\n"

// Wrap is the reasoning in the wrapper every position uses: <think> tags,
// which reasoning models write and read. No trailing whitespace: Anthropic
// refuses an assistant prefill that ends with any.
func Wrap(reasoning string) string {
	return "<think>\n" + strings.TrimSpace(reasoning) + "\n</think>"
}

// Injected is the exact text the answer leg's request carries for
// reasoning at where.
func Injected(reasoning string, where Inject) string {
	if where == Prefill {
		return Wrap(reasoning)
	}
	return Preamble + Wrap(reasoning)
}

// ErrNotObject is a body that is not a JSON object.
var ErrNotObject = errors.New("the request body is not a JSON object")

// ErrLogprobs is a request that asks for log probabilities: the splice
// rewrites each answer chunk to its text, tool calls and finish (as the
// relay's writer writes them), so the answer leg's logprobs could not
// reach the client; the request is refused rather than answered without
// them.
var ErrLogprobs = errors.New("log probabilities (logprobs, top_logprobs) are not available on a hand-off alias: the answer is spliced from two models' streams; leave them out, or ask a model that is not a hand-off alias")

// asksLogprobs reports a request for log probabilities: Chat's logprobs
// true or top_logprobs, Responses' top_logprobs or the include of
// message.output_text.logprobs. Messages has none.
func asksLogprobs(d Dialect, top object) bool {
	set := func(k string) bool {
		v, ok := top[k]
		return ok && string(v) != "null" && string(v) != "false" && string(v) != "0"
	}
	switch d {
	case Chat:
		return set("logprobs") || set("top_logprobs")
	case Responses:
		var include []string
		_ = json.Unmarshal(top["include"], &include)
		return set("top_logprobs") || slices.Contains(include, "message.output_text.logprobs")
	}
	return false
}

// Reason is the reasoning leg's body: the client's, asked for a stream
// (with its usage, in Chat), with the reasoning of earlier turns removed
// (see stripHistory), and its thinking's text asked for (showThinking).
func Reason(d Dialect, body []byte) ([]byte, error) {
	top, err := decode(body)
	if err != nil {
		return nil, err
	}
	if asksLogprobs(d, top) {
		return nil, ErrLogprobs
	}
	if err := stripHistory(d, top); err != nil {
		return nil, err
	}
	if d == Messages {
		showThinking(top)
	}
	streamOn(d, top)
	return json.Marshal(top)
}

// showThinking asks a Messages reasoning leg for its thinking's text: a
// thinking.display that hides it ("omitted", which Claude Opus 4.7 and
// later default to; "updates", which Claude Code sends: text for the
// progress notes between tool calls only) leaves the leg's thinking
// blocks empty, with nothing to hand off. Only a display the client sent
// is changed, to "summarized": an upstream that knows the member takes
// that value, and one that does not never sees it.
func showThinking(top object) {
	var th object
	if json.Unmarshal(top["thinking"], &th) != nil || th == nil {
		return
	}
	if d, ok := th["display"]; !ok || str(d) == "summarized" {
		return
	}
	th["display"] = mustJSON("summarized")
	top["thinking"] = mustJSON(th)
}

// Answer is the answer leg's body: the client's, asked for a stream, the
// reasoning of earlier turns removed, the request's own reasoning knobs
// removed (the answer leg answers; it is not asked to reason again: a
// target's `set` adds a knob back) with what needs them (Messages context
// edits, dropThinkingEdits; the Responses reasoning's encrypted content,
// dropReasoningInclude), and reasoning injected at where
// (nothing when reasoning is empty: the reasoning leg gave none).
func Answer(d Dialect, body []byte, reasoning string, where Inject) ([]byte, error) {
	top, err := decode(body)
	if err != nil {
		return nil, err
	}
	if err := stripHistory(d, top); err != nil {
		return nil, err
	}
	dropKnobs(d, top)
	streamOn(d, top)
	if strings.TrimSpace(reasoning) != "" {
		if err := inject(d, top, reasoning, where); err != nil {
			return nil, err
		}
	}
	return json.Marshal(top)
}

// knobs are the members that ask a model to reason, per dialect.
var knobs = [...][]string{
	Chat:      {"reasoning_effort", "reasoning", "thinking"},
	Messages:  {"thinking"},
	Responses: {"reasoning"},
}

// dropKnobs removes the request's reasoning knobs (knobs) and what needs
// them: Messages context edits (dropThinkingEdits), the Responses
// reasoning's encrypted content (dropReasoningInclude).
func dropKnobs(d Dialect, top object) {
	for _, k := range knobs[d] {
		delete(top, k)
	}
	switch d {
	case Messages:
		dropThinkingEdits(top)
	case Responses:
		dropReasoningInclude(top)
	}
}

// dropThinkingEdits removes the context edits that manage thinking blocks
// (clear_thinking_20251015 and later versions) from a Messages body whose
// thinking was turned off: Anthropic refuses them without thinking
// enabled, and Claude Code sends one with every request. The other edits
// (clear_tool_uses...) stay; context_management goes when nothing is left
// of it. A member of another shape is left to the upstream to judge.
func dropThinkingEdits(top object) {
	var cm object
	if json.Unmarshal(top["context_management"], &cm) != nil || cm == nil {
		return
	}
	var edits []object
	if json.Unmarshal(cm["edits"], &edits) != nil {
		return
	}
	kept := edits[:0]
	for _, e := range edits {
		if !strings.HasPrefix(str(e["type"]), "clear_thinking") {
			kept = append(kept, e)
		}
	}
	if len(kept) == len(edits) {
		return
	}
	if len(kept) == 0 {
		delete(cm, "edits")
	} else {
		cm["edits"] = mustJSON(kept)
	}
	if len(cm) == 0 {
		delete(top, "context_management")
		return
	}
	top["context_management"] = mustJSON(cm)
}

// dropReasoningInclude removes "reasoning.encrypted_content" from a
// Responses body's include: OpenAI refuses it for a model that does not
// reason ("Encrypted content is not supported with this model"), the
// kind an answer leg often is, and Codex CLI asks for it on every
// request. The answer leg's reasoning is never forwarded, so nothing is
// lost when the model does reason. include goes when nothing is left of
// it; a member of another shape is left to the upstream to judge.
func dropReasoningInclude(top object) {
	var include []json.RawMessage
	if json.Unmarshal(top["include"], &include) != nil {
		return
	}
	kept := include[:0]
	for _, v := range include {
		if str(v) != "reasoning.encrypted_content" {
			kept = append(kept, v)
		}
	}
	switch {
	case len(kept) == len(include):
	case len(kept) == 0:
		delete(top, "include")
	default:
		top["include"] = mustJSON(kept)
	}
}

type object = map[string]json.RawMessage

func decode(body []byte) (object, error) {
	var top object
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return nil, ErrNotObject
	}
	return top, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only strings, maps and slices of them
	}
	return b
}

// streamOn asks for a stream; a Chat body also for its usage chunk, which
// the relay sums over both legs, and for one choice: the splice reads
// choice 0 only, and a chunk of another choice would end the stream with
// an error (Splicer.Answer), so `n` is not sent.
func streamOn(d Dialect, top object) {
	top["stream"] = json.RawMessage("true")
	if d != Chat {
		return
	}
	delete(top, "n")
	opts := object{}
	if raw, ok := top["stream_options"]; ok {
		_ = json.Unmarshal(raw, &opts) // not an object: replaced
		if opts == nil {
			opts = object{}
		}
	}
	opts["include_usage"] = json.RawMessage("true")
	top["stream_options"] = mustJSON(opts)
}

// stripHistory removes the reasoning of earlier assistant turns. The relay
// wrote it (a hand-off's reasoning reaches the client as a reasoning
// field, an unsigned thinking block or a reasoning item without
// encrypted content) and no provider takes it back: DeepSeek refuses
// reasoning_content in its input, Anthropic an unsigned thinking block,
// OpenAI a reasoning item it did not make.
func stripHistory(d Dialect, top object) error {
	switch d {
	case Chat:
		if fastHistory && !mayHold(top["messages"], "reasoning") {
			return checkMessages(top["messages"]) // nothing to remove: not decoded
		}
		return editMessages(top, "messages", func(m object) (object, error) {
			if role(m) == "assistant" {
				delete(m, "reasoning_content")
				delete(m, "reasoning")
				delete(m, "reasoning_details")
			}
			return m, nil
		})
	case Messages:
		if fastHistory && !mayHold(top["messages"], "thinking") {
			return checkMessages(top["messages"])
		}
		return editMessages(top, "messages", func(m object) (object, error) {
			if role(m) != "assistant" {
				return m, nil
			}
			var blocks []object
			if json.Unmarshal(m["content"], &blocks) != nil {
				return m, nil // a string: no thinking in it
			}
			kept := blocks[:0]
			for _, b := range blocks {
				if t := str(b["type"]); t != "thinking" && t != "redacted_thinking" {
					kept = append(kept, b)
				}
			}
			if len(kept) == 0 {
				return nil, nil // a turn of thinking only: nothing left to send
			}
			m["content"] = mustJSON(kept)
			return m, nil
		})
	case Responses:
		if fastHistory && !mayHold(top["input"], "reasoning") {
			return nil
		}
		var items []object
		if json.Unmarshal(top["input"], &items) != nil {
			return nil // a string, or absent
		}
		kept := items[:0]
		for _, it := range items {
			if str(it["type"]) != "reasoning" {
				kept = append(kept, it)
			}
		}
		top["input"] = mustJSON(kept)
	}
	return nil
}

// editMessages applies f to each message of top[key]; f returning nil
// drops the message.
func editMessages(top object, key string, f func(object) (object, error)) error {
	raw, ok := top[key]
	if !ok {
		return nil
	}
	var msgs []object
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return fmt.Errorf("%s: not an array of objects", key)
	}
	kept := msgs[:0]
	for _, m := range msgs {
		m, err := f(m)
		if err != nil {
			return err
		}
		if m != nil {
			kept = append(kept, m)
		}
	}
	top[key] = mustJSON(kept)
	return nil
}

func role(m object) string { return str(m["role"]) }

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// inject puts the reasoning where the answer leg reads it.
func inject(d Dialect, top object, reasoning string, where Inject) error {
	text := Injected(reasoning, where)
	switch d {
	case Chat:
		return injectChat(top, text, where)
	case Messages:
		return injectMessages(top, text, where)
	}
	return injectResponses(top, text, where)
}

// textPart is a content part of text in each dialect.
func textPart(d Dialect, text, role string) object {
	typ := "text"
	if d == Responses {
		typ = "input_text"
		if role == "assistant" {
			typ = "output_text"
		}
	}
	return object{"type": mustJSON(typ), "text": mustJSON(text)}
}

// appendText adds text to a message's content: after a string content
// (a blank line between), or as a new last part of an array.
func appendText(d Dialect, m object, text string) error {
	var s string
	if err := json.Unmarshal(m["content"], &s); err == nil {
		if d == Messages {
			// Blocks, not one string: the client's text stays byte for
			// byte what it was, and a cache_control added later keeps
			// its place.
			m["content"] = mustJSON([]object{textPart(d, s, role(m)), textPart(d, text, role(m))})
			return nil
		}
		m["content"] = mustJSON(s + "\n\n" + text)
		return nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(m["content"], &parts); err != nil {
		return errors.New("a message's content is neither a string nor an array")
	}
	parts = append(parts, mustJSON(textPart(d, text, role(m))))
	m["content"] = mustJSON(parts)
	return nil
}

// prependText puts text before a message's content (a client's own
// prefill, which the model then continues after the reasoning).
func prependText(d Dialect, m object, text string) error {
	var s string
	if err := json.Unmarshal(m["content"], &s); err == nil {
		m["content"] = mustJSON(text + "\n\n" + s)
		return nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(m["content"], &parts); err != nil {
		return errors.New("a message's content is neither a string nor an array")
	}
	parts = append([]json.RawMessage{mustJSON(textPart(d, text, role(m)))}, parts...)
	m["content"] = mustJSON(parts)
	return nil
}

// messagesOf is the messages array, each message as it came: injecting
// decodes and re-encodes only the one or two messages it edits, not the
// whole conversation (milliseconds for 100 KB with encoding/json's maps).
func messagesOf(top object) ([]json.RawMessage, error) {
	raw, ok := top["messages"]
	if !ok {
		return nil, nil
	}
	msgs, ok := splitArray(raw)
	if !ok && json.Unmarshal(raw, &msgs) != nil {
		return nil, errMessages
	}
	for _, m := range msgs {
		if m[0] != '{' && string(m) != "null" {
			return nil, errMessages // as decoding into []object refuses it
		}
	}
	return msgs, nil
}

var errMessages = errors.New("messages: not an array of objects")

// fastHistory lets stripHistory pass over a conversation that cannot
// hold what it removes (mayHold); tests turn it off to compare.
var fastHistory = true

// splitArray is the elements of the JSON array raw, each a slice of it,
// found with jsonscan (a quarter of encoding/json's time, nothing
// copied); ok false for anything it does not read (not an array, or
// nested deeper than jsonscan goes), which encoding/json then judges.
func splitArray(raw json.RawMessage) (elems []json.RawMessage, ok bool) {
	b := []byte(raw)
	i := jsonscan.SkipWS(b, 0)
	if jsonscan.IsNull(b, i) {
		return nil, jsonscan.SkipWS(b, i+len("null")) == len(b)
	}
	arr := jsonscan.NewArrIter(b, i, 1)
	for {
		vs, more := arr.Next()
		if !more {
			break
		}
		arr.Skip()
		if arr.Err {
			return nil, false
		}
		elems = append(elems, b[vs:arr.Pos:arr.Pos])
	}
	return elems, !arr.Err && jsonscan.SkipWS(b, arr.Pos) == len(b)
}

// joinArray is the JSON array of elems, as they are (the body's final
// encoding compacts them).
func joinArray(elems []json.RawMessage) json.RawMessage {
	n := 2
	for _, e := range elems {
		n += len(e) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']')
}

// checkMessages refuses a messages member that is not an array of
// objects (or nulls), as decoding it into []object does; absent is fine.
func checkMessages(raw json.RawMessage) error {
	if raw == nil {
		return nil
	}
	_, err := messagesOf(object{"messages": raw})
	return err
}

// message decodes one message of messagesOf (nil for a null one).
func message(raw json.RawMessage) (object, error) {
	var m object
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errMessages
	}
	return m, nil
}

// mayHold reports whether raw may hold a member or value that spells word
// (what stripHistory removes): the word itself, or a \u escape that is
// not one of those encoding/json writes for HTML characters (which spell
// no letter), since an escape may spell any letter of it. When it cannot,
// there is nothing to remove, and the conversation is not decoded.
func mayHold(raw json.RawMessage, word string) bool {
	if bytes.Contains(raw, []byte(word)) {
		return true
	}
	for b := []byte(raw); ; {
		i := bytes.Index(b, []byte(`\u`))
		if i < 0 {
			return false
		}
		b = b[i+2:]
		if len(b) < 4 {
			return true
		}
		switch string(b[:4]) {
		case "003c", "003e", "0026", "2028", "2029":
		default:
			return true
		}
	}
}

// lastMessage is the top object's messages and its last one (nil for
// none).
func lastMessage(top object) (msgs []json.RawMessage, last object, err error) {
	if msgs, err = messagesOf(top); err != nil || len(msgs) == 0 {
		return msgs, nil, err
	}
	last, err = message(msgs[len(msgs)-1])
	return msgs, last, err
}

// injectTurns injects into a messages array (Chat and Messages): Prefill
// and User. A conversation that ends with the client's own prefill (an
// assistant turn) keeps it last.
func injectTurns(d Dialect, top object, text string, where Inject) error {
	msgs, last, err := lastMessage(top)
	if err != nil {
		return err
	}
	n := len(msgs)
	prefilled := n > 0 && role(last) == "assistant"
	switch where {
	case Prefill:
		if prefilled {
			if err := prependText(d, last, text); err != nil {
				return err
			}
			msgs[n-1] = mustJSON(last)
			break
		}
		m := object{"role": mustJSON("assistant")}
		if d == Messages {
			m["content"] = mustJSON([]object{textPart(d, text, "assistant")})
		} else {
			m["content"] = mustJSON(text)
		}
		msgs = append(msgs, mustJSON(m))
	case User:
		at, user := n, last // the last user turn is msgs[at-1]
		if prefilled {
			at, user = n-1, nil
			if at > 0 {
				if user, err = message(msgs[at-1]); err != nil {
					return err
				}
			}
		}
		if at > 0 && role(user) == "user" {
			// The last user turn (in Messages, tool results may be
			// followed by text in the same turn).
			if err := appendText(d, user, text); err != nil {
				return err
			}
			msgs[at-1] = mustJSON(user)
			break
		}
		m := object{"role": mustJSON("user"), "content": mustJSON(text)}
		msgs = append(msgs[:at], append([]json.RawMessage{mustJSON(m)}, msgs[at:]...)...)
	}
	top["messages"] = joinArray(msgs)
	return nil
}

func injectChat(top object, text string, where Inject) error {
	if where != System {
		return injectTurns(Chat, top, text, where)
	}
	msgs, err := messagesOf(top)
	if err != nil {
		return err
	}
	var first object
	if len(msgs) > 0 {
		if first, err = message(msgs[0]); err != nil {
			return err
		}
	}
	if r := role(first); r == "system" || r == "developer" {
		if err := appendText(Chat, first, text); err != nil {
			return err
		}
		msgs[0] = mustJSON(first)
	} else {
		msgs = append([]json.RawMessage{mustJSON(object{"role": mustJSON("system"), "content": mustJSON(text)})}, msgs...)
	}
	top["messages"] = joinArray(msgs)
	return nil
}

func injectMessages(top object, text string, where Inject) error {
	if where != System {
		return injectTurns(Messages, top, text, where)
	}
	raw, ok := top["system"]
	if !ok || string(raw) == "null" {
		top["system"] = mustJSON(text)
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		top["system"] = mustJSON(s + "\n\n" + text)
		return nil
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return errors.New("system: neither a string nor an array")
	}
	top["system"] = mustJSON(append(blocks, mustJSON(textPart(Messages, text, "system"))))
	return nil
}

func injectResponses(top object, text string, where Inject) error {
	if where == System {
		var s string
		if raw, ok := top["instructions"]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &s); err != nil {
				return errors.New("instructions: not a string")
			}
			s += "\n\n"
		}
		top["instructions"] = mustJSON(s + text)
		return nil
	}
	var items []json.RawMessage
	if raw, ok := top["input"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			items = []json.RawMessage{mustJSON(object{"type": mustJSON("message"), "role": mustJSON("user"),
				"content": mustJSON([]object{textPart(Responses, s, "user")})})}
		} else if err := json.Unmarshal(raw, &items); err != nil {
			return errors.New("input: neither a string nor an array")
		}
	}
	r := "user"
	if where == Prefill {
		r = "assistant"
	}
	items = append(items, mustJSON(object{"type": mustJSON("message"), "role": mustJSON(r),
		"content": mustJSON([]object{textPart(Responses, text, r)})}))
	top["input"] = mustJSON(items)
	return nil
}
