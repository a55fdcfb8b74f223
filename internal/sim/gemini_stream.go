package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// geminiWriter writes the chunks of a streamGenerateContent answer,
// flushing each one, in one of Gemini's two framings:
//
//   - with ?alt=sse, Server-Sent Events: `data: <chunk>\r\n\r\n`, with
//     no event names and no [DONE] (the chunk with a finishReason is the
//     last); Google's servers end events with CRLF CRLF (as in the
//     recording testdata/gemini/function_call.sse), and the SDKs split
//     on "\n\n", "\r\r" and "\r\n\r\n" alike;
//   - without it, one JSON array streamed element by element:
//     `[<chunk>\n,\r\n<chunk>\n]`, as Google's servers send it.
//
// Like sseWriter it trips the request's drop or error fault after After
// counted chunks. The error fault sends Google's error object as one
// more chunk (`data: {"error":{...}}` or an array element, the array
// then closed), which @google/genai raises as an ApiError with the
// code as its status.
type geminiWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	buf   bytes.Buffer
	sse   bool
	fault *Fault // drop or error fault not yet tripped, or nil
	sent  int    // counted chunks sent
	elems int    // array elements written
}

// counted sends a chunk that counts toward a fault's After.
func (gw *geminiWriter) counted(v any) error {
	if tripsAt(gw.fault, gw.sent) {
		return gw.trip()
	}
	if err := gw.chunk(v); err != nil {
		return err
	}
	gw.sent++
	if tripsAt(gw.fault, gw.sent) {
		return gw.trip()
	}
	return nil
}

// end sends the last chunk (the one with the finishReason) and closes
// the array; a fault still pending, placed beyond the last counted chunk
// or before the end, trips instead: for Gemini both are the same place.
func (gw *geminiWriter) end(v any) error {
	if gw.fault != nil {
		return gw.trip()
	}
	if err := gw.chunk(v); err != nil {
		return err
	}
	return gw.close()
}

// trip applies the pending fault.
func (gw *geminiWriter) trip() error {
	f := gw.fault
	gw.fault = nil
	if f.Kind == FaultDrop {
		_ = gw.rc.Flush()
		return errDrop
	}
	if err := gw.chunk(geminiInBandError); err != nil {
		return err
	}
	if err := gw.close(); err != nil {
		return err
	}
	return errFaulted
}

// chunk writes one chunk in the stream's framing.
func (gw *geminiWriter) chunk(v any) error {
	gw.buf.Reset()
	switch {
	case gw.sse:
		gw.buf.WriteString("data: ")
	case gw.elems == 0:
		gw.buf.WriteString("[")
	default:
		gw.buf.WriteString(",\r\n")
	}
	if err := json.NewEncoder(&gw.buf).Encode(v); err != nil { // JSON plus "\n"
		return err
	}
	if gw.sse {
		gw.buf.Truncate(gw.buf.Len() - 1)
		gw.buf.WriteString("\r\n\r\n")
	}
	gw.elems++
	return gw.send()
}

// close ends the JSON array; SSE has nothing to close.
func (gw *geminiWriter) close() error {
	if gw.sse {
		return nil
	}
	gw.buf.Reset()
	if gw.elems == 0 {
		gw.buf.WriteString("[")
	}
	gw.buf.WriteString("]")
	return gw.send()
}

func (gw *geminiWriter) send() error {
	if _, err := gw.w.Write(gw.buf.Bytes()); err != nil {
		return err
	}
	return gw.rc.Flush()
}

// streamGemini answers streamGenerateContent after TTFB: one chunk per
// thought piece (when asked for), one per text piece, the first of them
// signed (or the function call, whole, signed), each phase paced by its
// Pattern and every chunk carrying the cumulative usageMetadata; then a
// last chunk with an empty text part, the finishReason and the final
// usage. The text is the other dialects'.
func (s *Server) streamGemini(w http.ResponseWriter, r *http.Request, p *geminiPlan, f *Fault, sse bool) error {
	wt := waiter{r.Context()}
	if err := wt.wait(s.cfg.TTFB); err != nil {
		return err
	}
	h := w.Header()
	if sse {
		h.Set("Content-Type", "text/event-stream")
	} else {
		h.Set("Content-Type", "application/json; charset=UTF-8")
	}
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	gw := &geminiWriter{w: w, rc: http.NewResponseController(w), sse: sse, fault: f}

	thoughts := len(p.thoughts)
	if p.show {
		pc := newPacer(s.cfg.ReasoningPattern, wt)
		for i, piece := range p.thoughts {
			if err := pc.before(i); err != nil {
				return err
			}
			part := geminiPart{Text: &piece, Thought: true}
			if err := gw.counted(p.response([]geminiPart{part}, "", p.usage(i+1, 0))); err != nil {
				return err
			}
		}
	}
	signature := p.signature // until a part carries it
	if p.tool != nil {
		if err := gw.counted(p.response([]geminiPart{p.callPart()}, "", p.usage(thoughts, p.candidatesTokens()))); err != nil {
			return err
		}
		signature = ""
	}
	pc := newPacer(s.cfg.ContentPattern, wt)
	for i, piece := range p.content {
		if err := pc.before(i); err != nil {
			return err
		}
		part := geminiPart{Text: &piece, ThoughtSignature: signature}
		signature = ""
		if err := gw.counted(p.response([]geminiPart{part}, "", p.usage(thoughts, i+1))); err != nil {
			return err
		}
	}
	last := geminiPart{Text: new(""), ThoughtSignature: signature}
	return gw.end(p.response([]geminiPart{last}, p.finish, p.usage(thoughts, p.candidatesTokens())))
}
