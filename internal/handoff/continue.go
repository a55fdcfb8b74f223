package handoff

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode"
)

// How is how a target is asked to continue an answer that broke after
// the commit point (issue 30): the continuation's request carries the
// answer so far, and the target writes the rest.
type How uint8

const (
	// PrefillTurn is a trailing assistant turn holding the answer so far,
	// which the model continues: Anthropic, and any Chat provider that
	// continues a trailing assistant turn. (Prefill is the hand-off's
	// Inject of the same idea, hence the name.)
	PrefillTurn How = iota
	// Prefix is PrefillTurn plus DeepSeek's and Mistral's `"prefix": true`
	// on that assistant message (MarkPrefix, on the Chat payload sent
	// upstream).
	Prefix
	// ContinueFinal is PrefillTurn plus vLLM's and SGLang's
	// `"continue_final_message": true, "add_generation_prompt": false`
	// (MarkContinueFinal, on the Chat payload sent upstream).
	ContinueFinal
	// Instruct is the answer so far as an assistant turn, then a user
	// turn holding ContinueInstruction: for providers that never continue
	// a trailing assistant turn (OpenAI).
	Instruct
)

// ParseHow reads a continuation's `how`: prefill, prefix,
// continue_final_message or instruct.
func ParseHow(s string) (How, bool) {
	switch s {
	case "prefill":
		return PrefillTurn, true
	case "prefix":
		return Prefix, true
	case "continue_final_message":
		return ContinueFinal, true
	case "instruct":
		return Instruct, true
	}
	return 0, false
}

func (h How) String() string {
	switch h {
	case Prefix:
		return "prefix"
	case ContinueFinal:
		return "continue_final_message"
	case Instruct:
		return "instruct"
	}
	return "prefill"
}

// ContinueInstruction is the user turn after the answer so far in an
// Instruct continuation. It asks for the rest only: no repeat (the seam's
// Overlap drops a short one anyway), no comment on the cut, no
// greeting, the next character first.
const ContinueInstruction = "Your previous reply was cut off. Continue it exactly where it stopped, starting with the next character: do not repeat any of it, and do not comment on the interruption."

// ErrNotPrefilled is a Chat payload whose last message is not an
// assistant turn: there is nothing for MarkPrefix or MarkContinueFinal
// to mark.
var ErrNotPrefilled = errors.New("the last message is not an assistant turn: there is no prefill to continue")

// Continue is the continuation's request body, in the client's dialect
// d: the client's body, asked for a stream (streamOn), with the answer
// so far (answer: the text the client was sent) added as how says.
// Everything else (tools, tool_choice, cache markers, metadata,
// sampling) stays as the client sent it, and so does the history's
// reasoning: the continuation goes where the first attempt's failover
// would have gone.
//
// The answer goes in a trailing assistant turn, after the conversation's
// last turn (tool results included). A conversation that already ends
// with an assistant turn (the client's own prefill, which the target
// continued without repeating it) gets the answer appended to it: to its
// string content, or to the text of its last part (see extendPrefill).
//
// PrefillTurn, Prefix and ContinueFinal give the same body (the marks go
// on the Chat payload after translation: How.Mark). The turn's text is
// right-trimmed (Anthropic refuses a final assistant turn that ends with
// whitespace; the whitespace was sent, and the seam's Overlap drops the
// continuation's leading whitespace after it), and the request's
// reasoning knobs are removed as Answer removes them, with what needs
// them (Messages thinking-clearing edits and output_config.effort, the
// Responses reasoning include): the target continues the answer, it does
// not reason again, and Anthropic refuses a prefill with thinking on.
// Instruct keeps the knobs (the target may reason again; the relay drops
// reasoning shown after answer text) and the answer as it was sent,
// followed by a user turn holding ContinueInstruction.
//
// An answer of whitespace only, or "" (the break fell in the reasoning,
// before any answer), adds nothing: the body is the client's, asked for
// a stream, and the target starts over.
func Continue(d Dialect, body []byte, answer string, how How) ([]byte, error) {
	top, err := decode(body)
	if err != nil {
		return nil, err
	}
	streamOn(d, top)
	if strings.TrimSpace(answer) == "" {
		return json.Marshal(top)
	}
	if how != Instruct {
		dropKnobs(d, top)
		if d == Messages {
			dropOutputEffort(top)
		}
	}
	if d == Responses {
		err = continueResponses(top, answer, how)
	} else {
		err = continueTurns(d, top, answer, how)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(top)
}

// dropOutputEffort removes output_config.effort from a Messages body
// (output_config goes when nothing is left of it): the effort a
// continuation of an answer has no use for. A member of another shape is
// left to the upstream to judge.
func dropOutputEffort(top object) {
	var oc object
	if json.Unmarshal(top["output_config"], &oc) != nil || oc == nil {
		return
	}
	if _, ok := oc["effort"]; !ok {
		return
	}
	delete(oc, "effort")
	if len(oc) == 0 {
		delete(top, "output_config")
		return
	}
	top["output_config"] = mustJSON(oc)
}

func trimRight(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) }

// continueTurns adds the answer to a messages array (Chat and Messages).
func continueTurns(d Dialect, top object, answer string, how How) error {
	msgs, last, err := lastMessage(top)
	if err != nil {
		return err
	}
	n := len(msgs)
	var calls []json.RawMessage
	_ = json.Unmarshal(last["tool_calls"], &calls)
	prefilled := n > 0 && role(last) == "assistant" && len(calls) == 0
	if prefilled && extendPrefill(d, last, answer, how != Instruct) {
		msgs[n-1] = mustJSON(last)
	} else {
		if how != Instruct {
			answer = trimRight(answer)
		}
		m := object{"role": mustJSON("assistant")}
		if d == Messages {
			m["content"] = mustJSON([]object{textPart(d, answer, "assistant")})
		} else {
			m["content"] = mustJSON(answer)
		}
		msgs = append(msgs, mustJSON(m))
	}
	if how == Instruct {
		msgs = append(msgs, mustJSON(object{"role": mustJSON("user"), "content": mustJSON(ContinueInstruction)}))
	}
	top["messages"] = joinArray(msgs)
	return nil
}

// extendPrefill appends the answer to the client's own trailing assistant
// turn m, so that the target reads the client's prefill and the answer as
// the one text they were: a string content, or the text of a last text
// part, is concatenated with it (right-trimmed when trim); an array that
// ends with another part gets a new last text part. (Not a part of its
// own after a text part: the translation from Messages to Chat joins a
// turn's text blocks with a blank line, and vLLM's templates join text
// parts with a newline.) ok false for a content of another shape (null,
// absent): a new turn follows it.
func extendPrefill(d Dialect, m object, answer string, trim bool) (ok bool) {
	join := func(s string) string {
		if s += answer; trim {
			s = trimRight(s)
		}
		return s
	}
	var s string
	if json.Unmarshal(m["content"], &s) == nil {
		m["content"] = mustJSON(join(s))
		return true
	}
	var parts []json.RawMessage
	if json.Unmarshal(m["content"], &parts) != nil || parts == nil {
		return false
	}
	var last object
	if n := len(parts); n > 0 && json.Unmarshal(parts[n-1], &last) == nil && str(last["type"]) == "text" &&
		json.Unmarshal(last["text"], &s) == nil {
		last["text"] = mustJSON(join(s))
		parts[n-1] = mustJSON(last)
	} else {
		parts = append(parts, mustJSON(textPart(d, join(""), "assistant")))
	}
	m["content"] = mustJSON(parts)
	return true
}

// continueResponses adds the answer to a Responses input: an assistant
// message item (output_text), and for Instruct a user one after it. A
// string input becomes its user message item first.
func continueResponses(top object, answer string, how How) error {
	var items []json.RawMessage
	if raw, ok := top["input"]; ok && string(raw) != "null" {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			items = []json.RawMessage{mustJSON(responsesMessage("user", s))}
		} else if err := json.Unmarshal(raw, &items); err != nil {
			return errors.New("input: neither a string nor an array")
		}
	}
	if how != Instruct {
		answer = trimRight(answer)
	}
	items = append(items, mustJSON(responsesMessage("assistant", answer)))
	if how == Instruct {
		items = append(items, mustJSON(responsesMessage("user", ContinueInstruction)))
	}
	top["input"] = joinArray(items)
	return nil
}

// responsesMessage is a Responses message item of one text part.
func responsesMessage(role, text string) object {
	return object{"type": mustJSON("message"), "role": mustJSON(role),
		"content": mustJSON([]object{textPart(Responses, text, role)})}
}

// Mark is the Chat payload sent upstream (after translation to the
// target's Chat dialect) with how's flag: MarkPrefix for Prefix,
// MarkContinueFinal for ContinueFinal, the payload itself for the others.
func (h How) Mark(chatPayload []byte) ([]byte, error) {
	switch h {
	case Prefix:
		return MarkPrefix(chatPayload)
	case ContinueFinal:
		return MarkContinueFinal(chatPayload)
	}
	return chatPayload, nil
}

// MarkPrefix sets DeepSeek's and Mistral's `"prefix": true` on the last
// message of a Chat Completions payload, which must be an assistant
// message (ErrNotPrefilled).
func MarkPrefix(chatPayload []byte) ([]byte, error) {
	top, msgs, last, err := lastAssistant(chatPayload)
	if err != nil {
		return nil, err
	}
	last["prefix"] = json.RawMessage("true")
	msgs[len(msgs)-1] = mustJSON(last)
	top["messages"] = joinArray(msgs)
	return json.Marshal(top)
}

// MarkContinueFinal sets vLLM's and SGLang's `"continue_final_message":
// true` and `"add_generation_prompt": false` (the two cannot both be on,
// and the second defaults to true) on a Chat Completions payload whose
// last message is an assistant message (ErrNotPrefilled).
func MarkContinueFinal(chatPayload []byte) ([]byte, error) {
	top, _, _, err := lastAssistant(chatPayload)
	if err != nil {
		return nil, err
	}
	top["continue_final_message"] = json.RawMessage("true")
	top["add_generation_prompt"] = json.RawMessage("false")
	return json.Marshal(top)
}

// lastAssistant decodes a Chat payload whose last message is an
// assistant one.
func lastAssistant(chatPayload []byte) (top object, msgs []json.RawMessage, last object, err error) {
	if top, err = decode(chatPayload); err != nil {
		return nil, nil, nil, err
	}
	if msgs, err = messagesOf(top); err != nil {
		return nil, nil, nil, err
	}
	if len(msgs) == 0 {
		return nil, nil, nil, ErrNotPrefilled
	}
	if last, err = message(msgs[len(msgs)-1]); err != nil {
		return nil, nil, nil, err
	}
	if role(last) != "assistant" {
		return nil, nil, nil, ErrNotPrefilled
	}
	return top, msgs, last, nil
}
