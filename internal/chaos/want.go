package chaos

import "strconv"

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
}

// Check reports how a classified observation misses w, or "".
func (w Want) Check(o *Observation, r Result) string {
	if w.Complete && r.Class != Complete && r.Class != ReloadFailure {
		return "want a complete answer, got " + r.Class.String() + " (" + r.Detail + ")"
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
