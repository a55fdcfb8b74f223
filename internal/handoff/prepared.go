package handoff

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Prepared is an answer leg's body made before the reasoning is known:
// Answer's body cut where the reasoning goes. At the hand-off, Fill only
// copies the two halves around the reasoning's JSON text, where Answer
// decodes and re-encodes the whole conversation with encoding/json (a
// few milliseconds for a 100 KB conversation) while the client waits for
// the answer leg to start.
type Prepared struct {
	where  Inject
	prefix []byte // Answer's body up to the reasoning's text (inside its JSON string)
	suffix []byte // and after it
}

// marker stands for the reasoning while Prepare makes the body: plain
// ASCII, which JSON encodes as itself. A client body that holds it too
// makes it appear twice, and Prepare declines.
const marker = "RelayHandoffReasoningGoesHere7b3e1f"

// Prepare makes the answer leg's body for reasoning injected at where,
// all but the reasoning (see Answer); ok is false when it cannot (the
// body is not one Answer takes, or it holds the marker): Answer is then
// the way.
func Prepare(d Dialect, body []byte, where Inject) (p *Prepared, ok bool) {
	full, err := Answer(d, body, marker, where)
	if err != nil || bytes.Count(full, []byte(marker)) != 1 {
		return nil, false
	}
	i := bytes.Index(full, []byte(marker))
	return &Prepared{where: where, prefix: full[:i], suffix: full[i+len(marker):]}, true
}

// Where is the position the body was prepared for.
func (p *Prepared) Where() Inject { return p.where }

// Fill is the answer leg's body with reasoning: Answer(d, body,
// reasoning, where) byte for byte, when reasoning is not blank (ok false:
// a blank reasoning injects nothing, and Answer makes that body).
//
// The reasoning sits inside one JSON string, between ASCII text (Wrap's
// "<think>\n" and "\n</think>"), so its encoding on its own is its
// encoding in place: encoding/json encodes a string rune by rune (HTML
// characters and U+2028/9 escaped, an invalid byte as U+FFFD), and the
// body's other members were encoded, and re-encoded, the same way Answer
// does it.
func (p *Prepared) Fill(reasoning string) (body []byte, ok bool) {
	r := strings.TrimSpace(reasoning) // as Wrap trims it
	if r == "" {
		return nil, false
	}
	enc, err := json.Marshal(r)
	if err != nil {
		return nil, false // a string always encodes
	}
	enc = enc[1 : len(enc)-1] // the quotes
	out := make([]byte, 0, len(p.prefix)+len(enc)+len(p.suffix))
	out = append(out, p.prefix...)
	out = append(out, enc...)
	return append(out, p.suffix...), true
}
