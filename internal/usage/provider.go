package usage

import (
	"bytes"
	"encoding/json"
)

// ProviderUsage returns the usage object a Chat Completions chunk (or a
// whole answer) carries in a provider's own place instead of the standard
// top-level "usage", for the providers whose recorded streams show one:
//
//   - Groq: "x_groq":{"usage":{...}}. Its older streams, and its compound
//     models, report usage there only, on the finish chunk, whatever
//     stream_options asks.
//   - Moonshot (Kimi): "choices":[{...,"usage":{...}}], the usage inside
//     the first choice of the finish chunk (its top-level usage, when it
//     also sends one, comes in a later chunk).
//
// Both use OpenAI's member names, so ParseUsage reads what is returned.
// ok is false when b has neither (or is not JSON), and for an object
// ParseUsage cannot read. The caller prefers a standard usage object
// when there is one: ProviderUsage does not look at it.
//
// It decodes b with encoding/json: call it only for a chunk that has a
// usage object somewhere (see the callers' byte checks), one or two per
// stream.
func ProviderUsage(b []byte) (raw []byte, ok bool) {
	if !bytes.Contains(b, []byte(`"usage"`)) {
		return nil, false
	}
	var v struct {
		XGroq struct {
			Usage json.RawMessage `json:"usage"`
		} `json:"x_groq"`
		Choices []struct {
			Usage json.RawMessage `json:"usage"`
		} `json:"choices"`
	}
	if json.Unmarshal(b, &v) != nil {
		return nil, false
	}
	for _, u := range []json.RawMessage{v.XGroq.Usage, firstUsage(v.Choices)} {
		if _, parsed := ParseUsage(u); parsed {
			return u, true
		}
	}
	return nil, false
}

// firstUsage is the usage of the first choice, the one the relay reads.
func firstUsage(choices []struct {
	Usage json.RawMessage `json:"usage"`
}) json.RawMessage {
	if len(choices) == 0 {
		return nil
	}
	return choices[0].Usage
}

// ToolArgumentRunes counts the runes of the tool call arguments in a Chat
// Completions chunk or answer (tool_calls' and the legacy function_call's
// "arguments" strings, an escape sequence one rune), for the estimate of
// an answer whose upstream reported no usage: a tool call is output too.
// It is a byte scan with no allocation: `"arguments":` can only be a key,
// since a quote inside a JSON string is escaped.
func ToolArgumentRunes(b []byte) int {
	n := 0
	for {
		i := bytes.Index(b, argumentsKey)
		if i < 0 {
			return n
		}
		b = b[i+len(argumentsKey):]
		j := 0
		for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
			j++
		}
		if j == len(b) || b[j] != '"' {
			continue
		}
		for j++; j < len(b) && b[j] != '"'; j++ {
			switch c := b[j]; {
			case c == '\\':
				j++ // the escaped character, one rune; \uXXXX: its four digits too
				if j < len(b) && b[j] == 'u' {
					j += 4
				}
				n++
			case c < 0x80 || c >= 0xC0:
				n++ // an ASCII byte or the first byte of a rune
			}
		}
		b = b[min(j+1, len(b)):]
	}
}

var argumentsKey = []byte(`"arguments":`)
