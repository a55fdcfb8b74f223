package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// typedWriter writes the typed SSE events of the Messages and Responses
// streams, `event: <type>\ndata: <json>\n\n`, flushing each one. Like
// sseWriter it trips the request's drop or error fault after After counted
// events (the positions that match the Chat stream's first chunk and
// deltas); the error fault sends errData as an `event: error`, the dialect's
// in-band error.
type typedWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	buf   bytes.Buffer
	fault *Fault // drop or error fault not yet tripped, or nil
	sent  int    // counted events sent

	errData any // the in-band error event's data
	// numbered appends "sequence_number" (seq, then seq+1...) to every
	// event's data, as the Responses API does; v must then encode as an
	// object.
	numbered bool
	seq      int
}

func newTypedWriter(w http.ResponseWriter, f *Fault, errData any, numbered bool) *typedWriter {
	return &typedWriter{w: w, rc: http.NewResponseController(w), fault: f, errData: errData, numbered: numbered}
}

// counted sends an event that counts toward a fault's After: the fault
// trips right after the After-th (before the first when After is 0).
func (tw *typedWriter) counted(typ string, v any) error {
	if tripsAt(tw.fault, tw.sent) {
		return tw.trip()
	}
	if err := tw.event(typ, v); err != nil {
		return err
	}
	tw.sent++
	if tripsAt(tw.fault, tw.sent) {
		return tw.trip()
	}
	return nil
}

// beforeFinish trips a fault still pending that After placed beyond the
// last counted event: before the events that end the answer.
func (tw *typedWriter) beforeFinish() error {
	if tw.fault != nil && !tw.fault.BeforeEnd {
		return tw.trip()
	}
	return nil
}

// beforeEnd trips a fault placed BeforeEnd, instead of the stream's
// last event.
func (tw *typedWriter) beforeEnd() error {
	if tw.fault != nil {
		return tw.trip()
	}
	return nil
}

// trip applies the pending fault: a drop, or the in-band error event,
// which ends the stream without its terminating event.
func (tw *typedWriter) trip() error {
	f := tw.fault
	tw.fault = nil
	if f.Kind == FaultDrop {
		_ = tw.rc.Flush()
		return errDrop
	}
	if err := tw.event("error", tw.errData); err != nil {
		return err
	}
	return errFaulted
}

// event writes one event with v as its data.
func (tw *typedWriter) event(typ string, v any) error {
	tw.buf.Reset()
	tw.buf.WriteString("event: " + typ + "\ndata: ")
	enc := json.NewEncoder(&tw.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // compact JSON plus "\n"
		return err
	}
	if tw.numbered {
		tw.buf.Truncate(tw.buf.Len() - 2) // the closing brace and newline
		tw.buf.WriteString(`,"sequence_number":` + strconv.Itoa(tw.seq) + "}\n")
		tw.seq++
	}
	tw.buf.WriteByte('\n')
	if _, err := tw.w.Write(tw.buf.Bytes()); err != nil {
		return err
	}
	return tw.rc.Flush()
}
