package chaos

import (
	"strconv"
	"strings"
)

// Want is what a case's answers must be beyond the universal rules (no
// hang, no truncation, no malformed answer).
type Want struct {
	// ErrorStatus: an explicit error must carry this HTTP status (e.g.
	// 429 when every target rate-limits), with Retry-After when
	// RetryAfter is set.
	ErrorStatus int
	RetryAfter  bool
	// Complete: the upstream's answer was complete, so nothing but a
	// complete answer will do (an error here is a false alarm, e.g. a
	// truncation error appended to a complete /v1/responses stream).
	Complete bool
	// BodyAbort: the upstream breaks (or stalls) a non-stream body after
	// the commit point, so an abort is the expected answer to a
	// non-stream request. It may reach the client before the response
	// headers (they are still in Caddy's buffer), so a reload that ran
	// meanwhile is not its cause.
	BodyAbort bool
	// Text: a stream's answer text, when it ends well (complete or
	// continued), must be Text: one that is a strict prefix of it is a
	// silent truncation (Judge), and with Exact any other text is wrong
	// (Check). Needs the Observation's Dialect.
	Text  string
	Exact bool
}

// Judge applies Text to a classified stream: a stream that ended well
// with a strict prefix of the answer was silently truncated.
func (w Want) Judge(o *Observation, r Result) Result {
	if w.Text == "" || (r.Class != Complete && r.Class != Continued) {
		return r
	}
	if len(o.Text) < len(w.Text) && strings.HasPrefix(w.Text, o.Text) {
		return Result{Truncation, r.Class.String() + " stream ended well with " + strconv.Itoa(len(o.Text)) + " of the answer's " +
			strconv.Itoa(len(w.Text)) + " bytes (" + r.Detail + ")"}
	}
	return r
}

// Check reports how a classified observation misses w, or "".
func (w Want) Check(o *Observation, r Result) string {
	if w.Complete && r.Class != Complete && r.Class != Continued && r.Class != ReloadFailure {
		return "want a complete answer, got " + r.Class.String() + " (" + r.Detail + ")"
	}
	if w.Exact && w.Text != "" && (r.Class == Complete || r.Class == Continued) && o.Text != w.Text {
		return "want the answer " + strconv.Quote(short(w.Text)) + ", got " + strconv.Quote(short(o.Text)) + textDiff(w.Text, o.Text)
	}
	if r.Class != ExplicitError || w.ErrorStatus == 0 {
		return ""
	}
	if o.Status != w.ErrorStatus {
		if o.Status == 200 {
			return "want HTTP " + strconv.Itoa(w.ErrorStatus) + ", got an in-band error on a 200"
		}
		return "want HTTP " + strconv.Itoa(w.ErrorStatus) + ", got " + strconv.Itoa(o.Status)
	}
	if w.RetryAfter && o.RetryAfter == "" {
		return "want a Retry-After header, got none"
	}
	return ""
}

// short is s cut to a length a report line takes.
func short(s string) string {
	if len(s) > 80 {
		return s[:37] + "…" + s[len(s)-40:]
	}
	return s
}

// textDiff says where got first differs from want.
func textDiff(want, got string) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	return " (first difference at byte " + strconv.Itoa(i) + ")"
}
