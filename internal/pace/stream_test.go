package pace

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

// Run on synctest's virtual clock: real goroutines, timers and
// back-pressure, deterministic time.

// stepBody is an upstream body that releases each step at its time and
// fails with errAborted once aborted.
type stepBody struct {
	start   time.Time
	steps   []traces.Step
	rest    []byte
	aborted chan struct{}
	read    int // bytes handed out
	mu      sync.Mutex
	tail    error // returned after the last step (io.EOF if nil)
}

var errAborted = errors.New("upstream request cancelled")

func newStepBody(steps []traces.Step) *stepBody {
	return &stepBody{start: time.Now(), steps: steps, aborted: make(chan struct{})}
}

func (b *stepBody) Read(p []byte) (int, error) {
	for len(b.rest) == 0 {
		if len(b.steps) == 0 {
			if b.tail != nil {
				return 0, b.tail
			}
			return 0, io.EOF
		}
		wait := time.Until(b.start.Add(b.steps[0].At))
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-b.aborted:
				t.Stop()
				return 0, errAborted
			}
		}
		b.rest, b.steps = b.steps[0].Raw, b.steps[1:]
	}
	select {
	case <-b.aborted:
		return 0, errAborted
	default:
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	b.mu.Lock()
	b.read += n
	b.mu.Unlock()
	return n, nil
}

func (b *stepBody) abort() { close(b.aborted) }

// clientOut records what the client receives and when; it can fail after
// a number of writes, or be slow.
type clientOut struct {
	start     time.Time
	buf       bytes.Buffer
	writes    []emission
	failAfter int // fail the write after this many (0: never)
	slow      time.Duration
	mu        sync.Mutex
}

func (c *clientOut) Write(p []byte) (int, error) {
	if c.slow > 0 {
		time.Sleep(c.slow)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failAfter > 0 && len(c.writes) >= c.failAfter {
		return 0, errors.New("client went away")
	}
	c.buf.Write(p)
	c.writes = append(c.writes, emission{at: time.Since(c.start), raw: bytes.Clone(p)})
	return len(p), nil
}

func (c *clientOut) Flush() error { return nil }

func (c *clientOut) received() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Len()
}

// runTrace runs Run over steps the way respond.go does: the first data
// event is read before Run, as the attempt does.
func runTrace(t *testing.T, cfg Config, steps []traces.Step, out *clientOut) (Result, *stepBody) {
	t.Helper()
	body := newStepBody(steps)
	out.start = body.start
	rd := sse.NewReader(body, 0)
	var first []sse.Event
	for {
		ev, err := rd.Next()
		if err != nil {
			t.Fatalf("no first data event: %v", err)
		}
		first = append(first, ev.Clone())
		if ev.HasData {
			break
		}
	}
	res := Run(context.Background(), cfg, first, rd, out, body.abort)
	return res, body
}

func TestRunTracesExact(t *testing.T) {
	for _, tr := range traces.All() {
		for _, m := range modes {
			synctest.Test(t, func(t *testing.T) {
				out := &clientOut{}
				res, _ := runTrace(t, Config{Mode: m, Heartbeat: 15 * time.Second}, tr.Steps, out)
				want := map[string]End{traces.EndsDone: EndDone, traces.EndsError: EndEOF, traces.EndsEOF: EndEOF}[tr.Ends]
				if tr.Name == "eof-no-done" && res.End == EndUnterminated {
					want = EndUnterminated // it ends inside a block
				}
				if res.End != want {
					t.Fatalf("%s/%s: ended %v, want %v (err %v)", tr.Name, m, res.End, want, res.Err)
				}
				if res.SawError != (tr.Ends == traces.EndsError) {
					t.Errorf("%s/%s: SawError = %v", tr.Name, m, res.SawError)
				}
				got := transcriptOf(t, out.writes)
				if r, a := tr.Sent(); string(got.Answer) != a || string(got.Reasoning) != r {
					t.Errorf("%s/%s: text differs", tr.Name, m)
				}
				want2, _ := tr.Transcript()
				sameContent(t, tr.Name+"/"+m.String(), got, want2)
				if strings.Contains(out.buf.String(), ": keep-alive") {
					t.Errorf("%s/%s: heartbeat during a stream with no 15 s silence", tr.Name, m)
				}
			})
		}
	}
}

func TestRunHeartbeats(t *testing.T) {
	for _, m := range modes {
		testHeartbeats(t, m)
	}
}

func testHeartbeats(t *testing.T, m Mode) {
	synctest.Test(t, func(t *testing.T) {
		ev := chunkEvent("content", "Hello")
		steps := []traces.Step{
			{At: 0, Raw: ev.Raw},
			{At: 40 * time.Second, Raw: ev.Raw},
			{At: 40 * time.Second, Raw: []byte("data: [DONE]\n\n")},
		}
		out := &clientOut{}
		res, _ := runTrace(t, Config{Mode: m, Heartbeat: 15 * time.Second}, steps, out)
		if res.End != EndDone {
			t.Fatalf("%s: ended %v", m, res.End)
		}
		var beats []time.Duration
		for _, w := range out.writes {
			if string(w.raw) == ": keep-alive\n\n" {
				beats = append(beats, w.at)
			}
		}
		if len(beats) != 2 || beats[0] != 15*time.Second || beats[1] != 30*time.Second {
			t.Fatalf("%s: heartbeats at %v, want at 15s and 30s", m, beats)
		}
	})
}

func TestRunNoHeartbeatWhenOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := chunkEvent("content", "Hello")
		steps := []traces.Step{{At: 0, Raw: ev.Raw}, {At: 40 * time.Second, Raw: []byte("data: [DONE]\n\n")}}
		out := &clientOut{}
		runTrace(t, Config{Mode: ModeOff}, steps, out)
		if strings.Contains(out.buf.String(), "keep-alive") {
			t.Fatal("heartbeat sent with Heartbeat 0")
		}
	})
}

// The client going away mid-stream stops everything: the upstream is
// aborted and Run returns without leaving its reader behind (synctest
// fails the test if a goroutine is left blocked).
func TestRunClientGone(t *testing.T) {
	tr, _ := traces.ByName("bursts-300ms")
	for _, m := range modes {
		synctest.Test(t, func(t *testing.T) {
			out := &clientOut{failAfter: 3}
			res, body := runTrace(t, Config{Mode: m, Heartbeat: time.Second}, tr.Steps, out)
			if res.End != EndClientGone {
				t.Fatalf("%s: ended %v, want EndClientGone", m, res.End)
			}
			select {
			case <-body.aborted:
			default:
				t.Fatalf("%s: upstream not aborted", m)
			}
		})
	}
}

func TestRunContextCancel(t *testing.T) {
	for _, m := range modes {
		testContextCancel(t, m)
	}
}

func testContextCancel(t *testing.T, m Mode) {
	synctest.Test(t, func(t *testing.T) {
		ev := chunkEvent("content", "Hello")
		body := newStepBody([]traces.Step{{At: 0, Raw: ev.Raw}, {At: time.Hour, Raw: ev.Raw}})
		rd := sse.NewReader(body, 0)
		first, _ := rd.Next()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Second, cancel)
		res := Run(ctx, Config{Mode: m, Heartbeat: time.Second}, []sse.Event{first.Clone()}, rd, &clientOut{}, body.abort)
		if res.End != EndClientGone || time.Since(body.start) != 5*time.Second {
			t.Fatalf("%s: ended %v after %v", m, res.End, time.Since(body.start))
		}
	})
}

// A slow client slows the upstream reads: the relay never holds more than
// QueueBytes plus one read ahead of what the client took.
func TestRunBackPressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Chunks with logprobs pass unsplit, so what the client receives
		// is byte for byte what was read: the difference is what is held.
		ev := parseOne(`data: {"choices":[{"index":0,"delta":{"content":"` + strings.Repeat("word ", 50) +
			`"},"logprobs":{"content":[]},"finish_reason":null}]}` + "\n\n")
		var steps []traces.Step
		for range 400 {
			steps = append(steps, traces.Step{At: 0, Raw: ev.Raw})
		}
		steps = append(steps, traces.Step{At: 0, Raw: []byte("data: [DONE]\n\n")})
		const limit = 8 << 10
		out := &clientOut{slow: 10 * time.Millisecond}
		body := newStepBody(steps)
		out.start = body.start
		rd := sse.NewReader(body, 0)
		first, _ := rd.Next()
		maxAhead := 0
		done := make(chan Result)
		go func() {
			done <- Run(context.Background(), Config{Mode: ModePace, QueueBytes: limit}, []sse.Event{first.Clone()}, rd, out, body.abort)
		}()
		for finished := false; !finished; {
			select {
			case res := <-done:
				if res.End != EndDone {
					t.Errorf("ended %v", res.End)
				}
				finished = true
			default:
				time.Sleep(5 * time.Millisecond)
				body.mu.Lock()
				read := body.read
				body.mu.Unlock()
				maxAhead = max(maxAhead, read-out.received())
			}
		}
		// One read may take the reader's whole buffer (16 KiB) beyond
		// what is queued.
		if maxAhead > limit+len(ev.Raw)+16<<10 {
			t.Fatalf("the relay read %d bytes ahead of the client; the limit is %d", maxAhead, limit)
		}
		if maxAhead < limit/2 {
			t.Fatalf("read-ahead %d: the test did not exercise the limit", maxAhead)
		}
	})
}

func TestRunEndings(t *testing.T) {
	ev := chunkEvent("content", "Hello")
	cases := []struct {
		name string
		tail string
		err  error
		want End
		out  string // suffix the client must see
	}{
		{"done", "data: [DONE]\n\n", nil, EndDone, "data: [DONE]\n\n"},
		{"unterminated done", "data: [DONE]", nil, EndDone, "data: [DONE]\n\n"},
		{"unterminated event", `data: {"choices":[`, nil, EndUnterminated, "}\n\n"},
		{"eof", "", nil, EndEOF, "}\n\n"},
		{"broken", "", errors.New("connection reset"), EndBroken, "}\n\n"},
	}
	for _, c := range cases {
		synctest.Test(t, func(t *testing.T) {
			steps := []traces.Step{{At: 0, Raw: ev.Raw}}
			if c.tail != "" {
				steps = append(steps, traces.Step{At: time.Second, Raw: []byte(c.tail)})
			}
			body := newStepBody(steps)
			body.tail = c.err
			rd := sse.NewReader(body, 0)
			first, _ := rd.Next()
			out := &clientOut{}
			res := Run(context.Background(), Config{Mode: ModePace}, []sse.Event{first.Clone()}, rd, out, body.abort)
			if res.End != c.want {
				t.Fatalf("%s: ended %v, want %v", c.name, res.End, c.want)
			}
			if c.want == EndBroken && res.Err != c.err {
				t.Fatalf("%s: err %v", c.name, res.Err)
			}
			if !strings.HasSuffix(out.buf.String(), c.out) {
				t.Fatalf("%s: client got %q", c.name, out.buf.String())
			}
		})
	}
}

// Mode off: the events of one upstream read go out in one write (and one
// flush), at once, none held back for the next read.
func TestRunOffOneWritePerRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := func(s string) string {
			return `data: {"choices":[{"index":0,"delta":{"content":"` + s + `"}}]}` + "\n\n"
		}
		reads := []string{ev("a"), ev("b") + ev("c") + ev("d"), ev("e") + ev("f") + "data: [DONE]\n\n"}
		var steps []traces.Step
		for i, r := range reads {
			steps = append(steps, traces.Step{At: time.Duration(i) * 10 * time.Millisecond, Raw: []byte(r)})
		}
		out := &clientOut{}
		res, _ := runTrace(t, Config{Mode: ModeOff, Heartbeat: time.Second}, steps, out)
		if res.End != EndDone {
			t.Fatalf("end %v", res.End)
		}
		if len(out.writes) != len(reads) {
			t.Fatalf("%d writes for %d reads: %v", len(out.writes), len(reads), out.writes)
		}
		for i, w := range out.writes {
			if string(w.raw) != reads[i] || w.at != steps[i].At {
				t.Errorf("write %d at %v: %q, want %q at %v", i, w.at, w.raw, reads[i], steps[i].At)
			}
		}
	})
}
