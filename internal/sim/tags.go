package sim

import (
	"fmt"
	"slices"
	"strings"
)

// Reasoning forms: how a chat completion carries the reasoning text.
//
// Self-hosted reasoning models (DeepSeek-R1 and its distills, QwQ,
// Qwen3) served by vLLM, SGLang or Ollama without a reasoning parser
// write their reasoning into content between tags, and the server passes
// the text through as it detokenizes it. A relay that wants the
// reasoning apart has to find the tags in a stream, where a tag may
// arrive whole, glued to its neighbour's text, or cut anywhere (a
// speculative decoder, a buffering proxy or a multi-token step puts
// several tokens in one delta). The tags forms produce all of these.
const (
	// ReasoningFields sends the reasoning as reasoning_content, apart
	// from content, and reports completion_tokens_details.reasoning_tokens.
	// The default.
	ReasoningFields = "fields"

	// ReasoningTags sends "<think>\n" + reasoning + "\n</think>\n\n" +
	// answer as content, as Qwen3 and QwQ write it.
	ReasoningTags = "tags"

	// ReasoningTagsUnopened sends reasoning + "\n</think>\n\n" + answer
	// as content: no opening tag, as DeepSeek-R1 and its distills write
	// it when their chat template ends the prompt with "<think>\n".
	ReasoningTagsUnopened = "tags_unopened"
)

// ReasoningFormHeader is the request header that overrides
// Config.ReasoningForm for one chat completion, so one simulator can
// serve tests of several forms.
const ReasoningFormHeader = "X-Sim-Reasoning-Form"

// ReasoningTokensHeader caps the reasoning pieces of one chat completion
// (and its usage's reasoning_tokens) at its value, a whole number: a
// provider that reasons less under load, for tests of the relay's
// reasoning health.
const ReasoningTokensHeader = "X-Sim-Reasoning-Tokens"

// The tags as the models write them, each with the byte span of its tag
// word (a model's single token) inside.
var (
	openTag  = tagText{"<think>\n", 0, 7}
	closeTag = tagText{"\n</think>\n\n", 1, 9}
)

type tagText struct {
	text               string
	wordStart, wordEnd int // "<think>" or "</think>" is text[wordStart:wordEnd]
}

// tagCutKey separates the cut draws' generator from the fault draws',
// which are keyed by (seed, request, fault index).
const tagCutKey = 0x7461677363757473 // "tagscuts"

func validateForm(form string) error {
	switch form {
	case ReasoningFields, ReasoningTags, ReasoningTagsUnopened:
		return nil
	}
	return fmt.Errorf("unknown form %q (want %q, %q or %q)", form, ReasoningFields, ReasoningTags, ReasoningTagsUnopened)
}

// TaggedContent returns the content of a chat completion in form: the
// tagged reasoning followed by the answer in the tags forms (also when
// the reasoning is empty: Qwen3 writes an empty think block when it does
// not think), the answer alone in the fields form. With a tool call the
// answer is empty: the tagged reasoning is the content before the call.
func TaggedContent(form, reasoning, answer string) string {
	switch form {
	case ReasoningTags:
		return openTag.text + reasoning + closeTag.text + answer
	case ReasoningTagsUnopened:
		return reasoning + closeTag.text + answer
	}
	return answer
}

// cutTagged cuts the content of a stream in a tags form into content
// deltas. Reasoning and answer pieces stay one delta each, as in the
// fields form; around and inside each tag the cuts are drawn from r:
// each edge of a tag is a cut or glues the tag to its neighbour's text,
// each edge of its tag word inside it (the "\n" after "<think>", the
// "\n" before and "\n\n" after "</think>") is a cut or not, and half the
// time the tag word itself is cut at a random byte (`<th` + `ink>`).
// Tags are ASCII, so every delta is valid UTF-8.
//
// think are the deltas before the answer text (paced as reasoning),
// answer those holding answer text (paced as content).
func cutTagged(form string, reasoning, answer []string, r *rng) (think, ans []string) {
	type elem struct {
		text string
		tag  *tagText // nil for a reasoning or answer piece
	}
	var elems []elem
	if form == ReasoningTags {
		elems = append(elems, elem{openTag.text, &openTag})
	}
	for _, p := range reasoning {
		elems = append(elems, elem{p, nil})
	}
	elems = append(elems, elem{closeTag.text, &closeTag})
	for _, p := range answer {
		elems = append(elems, elem{p, nil})
	}

	coin := func() bool { return r.next()&1 == 0 }
	var text strings.Builder
	cuts := []int{0}
	for i, e := range elems {
		start := text.Len()
		if i > 0 && ((e.tag == nil && elems[i-1].tag == nil) || coin()) {
			cuts = append(cuts, start)
		}
		text.WriteString(e.text)
		if t := e.tag; t != nil {
			for _, o := range []int{t.wordStart, t.wordEnd} {
				if o > 0 && o < len(t.text) && coin() {
					cuts = append(cuts, start+o)
				}
			}
			if coin() {
				cuts = append(cuts, start+t.wordStart+1+int(r.next()%uint64(t.wordEnd-t.wordStart-1)))
			}
		}
	}
	full := text.String()
	cuts = append(cuts, len(full))
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)

	answerStart := len(full) - len(strings.Join(answer, ""))
	for i := 1; i < len(cuts); i++ {
		d := full[cuts[i-1]:cuts[i]]
		if cuts[i] > answerStart {
			ans = append(ans, d)
		} else {
			think = append(think, d)
		}
	}
	return think, ans
}
