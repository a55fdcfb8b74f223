package chaos

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// Limits are a client's own deadlines. A request still open past one of
// them is a hang.
type Limits struct {
	// FirstByte bounds the wait for the response headers (the relay may
	// legitimately take its whole try_duration before committing).
	FirstByte time.Duration
	// Idle bounds the silence between data on the body: for a stream,
	// between dispatched events (comments, i.e. heartbeats, do not count,
	// just as they do not for a user waiting for text); for other
	// bodies, between any bytes.
	Idle time.Duration
	// Total bounds the whole request.
	Total time.Duration
	// MaxBody caps the body bytes kept for classification (the rest is
	// read and dropped).
	MaxBody int
}

// errHang is the cause of a request cancelled by its own deadline.
type errHang struct{ phase string }

func (e *errHang) Error() string { return "client deadline: " + e.phase }

// Do sends req with client and watches its answer under lim. stream says
// whether the body is to be read as SSE. It never returns before the
// response is finished, broken or past a deadline.
func Do(ctx context.Context, client *http.Client, req *http.Request, stream bool, lim Limits) *Observation {
	o := &Observation{Stream: stream}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	total := time.AfterFunc(lim.Total, func() { cancel(&errHang{"total " + lim.Total.String()}) })
	defer total.Stop()
	first := time.AfterFunc(lim.FirstByte, func() { cancel(&errHang{"no response headers within " + lim.FirstByte.String()}) })
	resp, err := client.Do(req.WithContext(ctx))
	first.Stop()
	if err != nil {
		if h, ok := errors.AsType[*errHang](context.Cause(ctx)); ok {
			o.Hung, o.HangPhase = true, h.phase
			return o
		}
		o.PreResponseErr, o.ErrText = true, shortErr(err)
		return o
	}
	defer resp.Body.Close()
	o.Status = resp.StatusCode
	o.ContentType = resp.Header.Get("Content-Type")
	o.RetryAfter = resp.Header.Get("Retry-After")
	o.Location = resp.Header.Get("Location")

	idlePhase := "no body data for " + lim.Idle.String()
	if stream && o.Status >= 200 && o.Status < 300 {
		idlePhase = "no SSE event for " + lim.Idle.String() + " (heartbeats do not count)"
	}
	idle := time.AfterFunc(lim.Idle, func() { cancel(&errHang{idlePhase}) })
	defer idle.Stop()

	var ps LFParser
	parse := stream && o.Status >= 200 && o.Status < 300
	buf := make([]byte, 16<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			active := true
			if parse {
				evs := ps.Feed(buf[:n])
				active = len(evs) > 0
				o.Seams = ps.Seams
				for _, ev := range evs {
					if len(o.Events) < 10000 {
						o.Events = append(o.Events, ev)
					}
				}
			} else if len(o.Body) < lim.MaxBody {
				o.Body = append(o.Body, buf[:min(n, lim.MaxBody-len(o.Body))]...)
			}
			if active {
				idle.Reset(lim.Idle)
			}
		}
		if err == io.EOF {
			return o
		}
		if err != nil {
			if h, ok := errors.AsType[*errHang](context.Cause(ctx)); ok {
				o.Hung, o.HangPhase = true, h.phase
				return o
			}
			o.ReadErr, o.ErrText = true, shortErr(err)
			return o
		}
	}
}

// shortErr keeps the last, most specific part of a transport error.
func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && i+2 < len(s) {
		s = s[i+2:]
	}
	return s
}
