package chaos

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// journaled renders events n..m of a stream as the relay sends them: an
// id, the first a retry hint, a heartbeat comment glued to some.
func journaled(stream string, from, to int) string {
	var b strings.Builder
	for n := from; n <= to; n++ {
		if n%3 == 0 {
			b.WriteString(": keep-alive\n")
		}
		fmt.Fprintf(&b, "id: %s.%d\n", stream, n)
		if n == 1 {
			b.WriteString("retry: 1000\n")
		}
		fmt.Fprintf(&b, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"delta\":\"w%d\"}\n\n", n-1, n)
	}
	return b.String()
}

func parseAll(t *testing.T, s string, chunk int) []REvent {
	t.Helper()
	var ps RParser
	var out []REvent
	for i := 0; i < len(s); i += chunk {
		out = append(out, ps.Feed([]byte(s[i:min(i+chunk, len(s))]))...)
	}
	return out
}

func TestRParser(t *testing.T) {
	evs := parseAll(t, journaled("rs_x", 1, 4)+": relay-continued\n\n", 7)
	if len(evs) != 4 {
		t.Fatalf("%d events, want 4: %+v", len(evs), evs)
	}
	for i, ev := range evs {
		if ev.Stream != "rs_x" || ev.N != uint64(i+1) || ev.Seq != int64(i) || ev.Event.Type != "response.output_text.delta" {
			t.Errorf("event %d: %+v", i, ev)
		}
		if strings.Contains(ev.Fields, "keep-alive") || strings.Contains(ev.Fields, "retry") || strings.Contains(ev.Fields, "id:") {
			t.Errorf("event %d keeps a comment, retry or id line: %q", i, ev.Fields)
		}
	}
}

// TestResumeLog: the events of the connections of a client that resumes
// add up to the stream, and every way they could not is told apart.
func TestResumeLog(t *testing.T) {
	ev := func(from, to int) []REvent { return parseAll(t, journaled("rs_x", from, to), 1<<20) }
	whole := ev(1, 6)

	var l ResumeLog
	for _, step := range []struct {
		after    uint64
		from, to int
	}{{0, 1, 2}, {2, 3, 3}, {0, 1, 5}, {4, 5, 6}} { // a resume, a replay from the start, a resume
		if p := l.Add(step.after, ev(step.from, step.to)); p != "" {
			t.Fatalf("after %d: %s", step.after, p)
		}
	}
	if p := l.Same(whole); p != "" || l.Last() != 6 {
		t.Fatalf("the log is not the stream (last %d): %s", l.Last(), p)
	}
	if n, ok := l.AfterSeq(3); !ok || n != 4 {
		t.Fatalf("AfterSeq(3) = %d, %v; want 4", n, ok)
	}

	other := parseAll(t, journaled("rs_y", 3, 3), 1<<20)
	changed := ev(2, 2)
	changed[0].Fields = strings.Replace(changed[0].Fields, "w2", "w9", 1)
	for _, tt := range []struct {
		name  string
		after uint64
		evs   []REvent
		want  string
	}{
		{"duplicated", 2, append(ev(3, 3), ev(3, 3)...), "duplicated"},
		{"replayed again", 2, ev(2, 3), "duplicated"},
		{"lost", 2, ev(4, 5), "lost"},
		{"second generation", 2, other, "another stream"},
		{"differs", 1, changed, "differs"},
		{"cursor past the end", 5, ev(6, 6), "holding only"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var l ResumeLog
			if p := l.Add(0, ev(1, 2)); p != "" {
				t.Fatal(p)
			}
			if p := l.Add(tt.after, tt.evs); !strings.Contains(p, tt.want) {
				t.Fatalf("got %q, want a problem with %q", p, tt.want)
			}
		})
	}

	short := ResumeLog{}
	_ = short.Add(0, ev(1, 5))
	if p := short.Same(whole); !strings.Contains(p, "5 events, the whole stream 6") {
		t.Fatalf("a log one event short: %q", p)
	}
	differ := ResumeLog{}
	_ = differ.Add(0, append(ev(1, 1), changed...))
	if p := differ.Same(whole); !strings.Contains(p, "event 2") {
		t.Fatalf("a log with another event 2: %q", p)
	}
}

// TestHitsAndPacing: the upstream counts a nonce's requests, fresh or
// continuing an answer, by path; a paced answer takes its gaps.
func TestHitsAndPacing(t *testing.T) {
	up := NewUpstream(UpstreamParams{Seed: 7})
	srv := httptest.NewServer(up)
	defer srv.Close()
	defer up.Close()
	nonce := Nonce(42)
	send := func(path, model, messages string) time.Duration {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path,
			strings.NewReader(`{"model":"`+model+`","stream":true,"messages":[`+messages+`]}`))
		start := time.Now()
		o := Do(context.Background(), http.DefaultClient, req, true, testLimits)
		if o.Status != 200 {
			t.Fatalf("%s: status %d", model, o.Status)
		}
		return time.Since(start)
	}
	user := `{"role":"user","content":"hi ` + nonce + `"}`
	if d := send("/r/v1/chat/completions", "cont-good@x"+PacedSuffix, user); d < contWords*ContPacedGap {
		t.Fatalf("a paced answer took %s, under %d gaps of %s", d, contWords, ContPacedGap)
	}
	send("/b/v1/chat/completions", "cont-good@x", user+`,{"role":"assistant","content":"c0 c1"}`)
	send("/r/v1/chat/completions", "cont-good@x", `{"role":"user","content":"hi `+Nonce(43)+`"}`)
	hits := up.TakeHits(nonce)
	if len(hits) != 2 || Generations(hits, "/r/") != 1 || Generations(hits, "/b/") != 0 || Generations(hits, "/") != 1 {
		t.Fatalf("hits %+v", hits)
	}
	if again := up.TakeHits(nonce); len(again) != 0 {
		t.Fatalf("TakeHits kept them: %+v", again)
	}
	if findNonce([]byte(`{"content":"`+NoncePrefix+`12"}`)) != "" {
		t.Fatal("a cut nonce was found")
	}
}
