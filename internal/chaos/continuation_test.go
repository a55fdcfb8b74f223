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

func TestContAnswer(t *testing.T) {
	if !strings.HasPrefix(ContAnswer, "c0 c1 c2 ") || !strings.HasSuffix(ContAnswer, " c23.") {
		t.Fatalf("ContAnswer %q", ContAnswer)
	}
}

// TestContPieces: the continuation behaviours continue the answer so far
// of a trailing assistant turn (a prefill, or before the relay's
// instruction), as a string or as text parts, and say so when it is not
// their answer's prefix.
func TestContPieces(t *testing.T) {
	tests := []struct {
		name, body string
		want       string
	}{
		{"no answer so far", `{"messages":[{"role":"user","content":"hi"}]}`, ContAnswer},
		{"prefill", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"c0 c1"}]}`, ContAnswer[len("c0 c1"):]},
		{"instruction after it", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"c0 c1 c2"},{"role":"user","content":"Your previous reply was cut off."}]}`,
			ContAnswer[len("c0 c1 c2"):]},
		{"text parts", `{"messages":[{"role":"assistant","content":[{"type":"text","text":"c0"},{"type":"text","text":" c1"}]}]}`, ContAnswer[len("c0 c1"):]},
		{"the whole answer", `{"messages":[{"role":"assistant","content":"` + ContAnswer + `"}]}`, ""},
		{"not a prefix", `{"messages":[{"role":"assistant","content":"c0 c2"}]}`, ContMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := contPieces([]byte(tt.body))
			if got := strings.Join(ps, ""); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			for i, p := range ps {
				if i > 0 && !strings.HasPrefix(p, " ") {
					t.Errorf("piece %d %q does not start at a space", i, p)
				}
			}
		})
	}
}

// TestContBehaviours: straight from the upstream (no relay), ContGood is
// a whole, well-formed Chat stream of ContAnswer; the faulty behaviours
// send a prefix of it, then break as they say, never twice in a row for
// one target, and sometimes not at all.
func TestContBehaviours(t *testing.T) {
	up := NewUpstream(UpstreamParams{MaxStall: 5 * time.Second, Seed: 3})
	srv := httptest.NewServer(up)
	defer srv.Close()
	defer up.Close()
	lim := testLimits
	lim.Idle = 200 * time.Millisecond
	hitCont := func(b Behaviour) (*Observation, Result) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/a/v1/chat/completions",
			strings.NewReader(`{"model":"`+string(b)+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		o := Do(context.Background(), http.DefaultClient, req, true, lim)
		o.Dialect = DialectChat
		return o, Classify(o)
	}
	o, r := hitCont(ContGood)
	if r.Class != Complete || o.Text != ContAnswer {
		t.Fatalf("cont-good: %v (%s), text %q", r.Class, r.Detail, o.Text)
	}
	for _, tt := range []struct {
		b     Behaviour
		broke Class
	}{{ContDrop, Abort}, {ContError, ExplicitError}, {ContStall, Hang}} {
		t.Run(string(tt.b), func(t *testing.T) {
			prevBroke, whole, broke := false, 0, 0
			for range 12 {
				o, r := hitCont(tt.b)
				if !strings.HasPrefix(ContAnswer, o.Text) {
					t.Fatalf("text %q is not a prefix of the answer", o.Text)
				}
				switch r.Class {
				case Complete:
					if o.Text != ContAnswer {
						t.Fatalf("complete with %q", o.Text)
					}
					whole++
					prevBroke = false
				case tt.broke:
					if prevBroke {
						t.Fatalf("two breaks in a row")
					}
					broke++
					prevBroke = true
				default:
					t.Fatalf("got %v (%s), want complete or %v", r.Class, r.Detail, tt.broke)
				}
			}
			if whole == 0 || broke == 0 {
				t.Fatalf("%d whole, %d broken: want both", whole, broke)
			}
		})
	}
}

// TestContTags: "cont-drop@x" is cont-drop, and each tag is a target of
// its own for the never-twice-in-a-row rule.
func TestContTags(t *testing.T) {
	up := NewUpstream(UpstreamParams{Seed: 5})
	srv := httptest.NewServer(up)
	defer srv.Close()
	defer up.Close()
	hitTag := func(tag string) Class {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"cont-drop@`+tag+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		o := Do(context.Background(), http.DefaultClient, req, true, testLimits)
		o.Dialect = DialectChat
		r := Classify(o)
		if r.Class != Complete && r.Class != Abort {
			t.Fatalf("tag %s: %v (%s), want complete or abort", tag, r.Class, r.Detail)
		}
		return r.Class
	}
	brokeX, both := false, 0
	for range 40 {
		x := hitTag("x")
		if x == Abort && brokeX {
			t.Fatal("tag x broke twice in a row")
		}
		brokeX = x == Abort
		y := hitTag("y")
		if x == Abort && y == Abort {
			both++ // a break of x does not hold y back
		}
		if y == Abort && hitTag("y") == Abort {
			t.Fatal("tag y broke twice in a row")
		}
	}
	if both == 0 {
		t.Fatal("tag y never broke right after tag x: the tags share one target")
	}
	if n := up.Counts()[ContDrop]; n < 80 {
		t.Fatalf("Counts()[cont-drop] = %d: the tagged requests are not counted as cont-drop", n)
	}
}

const (
	chatRole   = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
	chatA      = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}` + "\n\n"
	chatB      = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" b"},"finish_reason":null}]}` + "\n\n"
	chatStop   = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	chatDone   = "data: [DONE]\n\n"
	chatSeam   = ": relay-continued upstream=b model=m at_token=1 where=answer\n\n"
	chatOtherB = `data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" b"},"finish_reason":null}]}` + "\n\n"

	msgStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n"
	msgBlock = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	msgText  = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n"
	msgStop  = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":%d}\n\n"
	msgEnd   = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	msgPing  = "event: ping\ndata: {\"type\": \"ping\"}\n\n"

	respEv = "event: %[1]s\ndata: {\"type\":%[1]q,\"sequence_number\":%[2]d%[3]s}\n\n"
)

func respStream(seq0 int, evs ...[2]string) string {
	var b strings.Builder
	for i, e := range evs {
		b.WriteString(fmt.Sprintf(respEv, e[0], seq0+i, e[1]))
	}
	return b.String()
}

var (
	respCreated = [2]string{"response.created", `,"response":{"id":"r"}`}
	respAdded   = [2]string{"response.output_item.added", `,"output_index":0,"item":{"id":"msg_1","type":"message"}`}
	respDeltaA  = [2]string{"response.output_text.delta", `,"output_index":0,"item_id":"msg_1","content_index":0,"delta":"a"`}
	respDeltaB  = [2]string{"response.output_text.delta", `,"output_index":0,"item_id":"msg_1","content_index":0,"delta":" b"`}
	respDone    = [2]string{"response.completed", `,"response":{"id":"r","status":"completed"}`}
)

// TestCheckStream: well-formed streams of each dialect give their text;
// each rule, broken, is found.
func TestCheckStream(t *testing.T) {
	msgOK := msgStart + fmt.Sprintf(msgBlock, 0) + msgPing + fmt.Sprintf(msgText, 0, "a") + fmt.Sprintf(msgText, 0, " b") + fmt.Sprintf(msgStop, 0) + msgEnd
	tests := []struct {
		name     string
		d        Dialect
		stream   string
		complete bool
		problem  string // a part of the problem, "" = well formed
	}{
		{"chat", DialectChat, chatRole + chatA + chatSeam + chatB + chatStop + chatDone, true, ""},
		{"chat cut, not complete", DialectChat, chatRole + chatA, false, ""},
		{"chat complete without finish_reason", DialectChat, chatRole + chatA + chatB + chatDone, true, "0 finish_reason"},
		{"chat second role", DialectChat, chatRole + chatA + chatRole + chatB + chatStop + chatDone, true, "second role"},
		{"chat id changes", DialectChat, chatRole + chatA + chatOtherB + chatStop + chatDone, true, "id"},
		{"chat content after finish", DialectChat, chatRole + chatA + chatStop + chatB + chatDone, true, "after finish_reason"},
		{"chat two finishes", DialectChat, chatRole + chatA + chatB + chatStop + chatStop + chatDone, true, "second finish_reason"},
		{"chat data after DONE", DialectChat, chatRole + chatA + chatB + chatStop + chatDone + chatB, true, "after [DONE]"},
		{"chat error ends the check", DialectChat, chatRole + chatA + `data: {"error":{"message":"x"}}` + "\n\n", false, ""},

		{"messages", DialectMessages, msgOK, true, ""},
		{"messages two blocks", DialectMessages, msgStart + fmt.Sprintf(msgBlock, 0) + fmt.Sprintf(msgText, 0, "a") + fmt.Sprintf(msgStop, 0) +
			fmt.Sprintf(msgBlock, 1) + fmt.Sprintf(msgText, 1, " b") + fmt.Sprintf(msgStop, 1) + msgEnd, true, ""},
		{"messages second message_start", DialectMessages, msgStart + fmt.Sprintf(msgBlock, 0) + fmt.Sprintf(msgText, 0, "a") + fmt.Sprintf(msgStop, 0) + msgStart + msgEnd, true, "second message_start"},
		{"messages index skips", DialectMessages, msgStart + fmt.Sprintf(msgBlock, 1) + fmt.Sprintf(msgStop, 1) + msgEnd, true, "index 1"},
		{"messages index reused", DialectMessages, msgStart + fmt.Sprintf(msgBlock, 0) + fmt.Sprintf(msgStop, 0) + fmt.Sprintf(msgBlock, 0) + fmt.Sprintf(msgStop, 0) + msgEnd, true, "index 0"},
		{"messages delta to a closed block", DialectMessages, msgStart + fmt.Sprintf(msgBlock, 0) + fmt.Sprintf(msgStop, 0) + fmt.Sprintf(msgText, 0, "a") + msgEnd, true, "content_block_delta"},
		{"messages block left open", DialectMessages, msgStart + fmt.Sprintf(msgBlock, 0) + fmt.Sprintf(msgText, 0, "a") + msgEnd, true, "open"},
		{"messages before message_start", DialectMessages, fmt.Sprintf(msgBlock, 0) + msgEnd, true, "before message_start"},
		{"messages after message_stop", DialectMessages, msgOK + fmt.Sprintf(msgBlock, 1), true, "after message_stop"},

		{"responses", DialectResponses, respStream(0, respCreated, respAdded, respDeltaA, respDeltaB, respDone), true, ""},
		{"responses second created", DialectResponses, respStream(0, respCreated, respAdded, respDeltaA) + respStream(3, respCreated, respDone), true, "second response.created"},
		{"responses sequence restarts", DialectResponses, respStream(0, respCreated, respAdded, respDeltaA) + respStream(0, respDeltaB, respDone), true, "sequence_number 0 after 2"},
		{"responses delta of no item", DialectResponses, respStream(0, respCreated, respDeltaA, respDone), true, "not an added item"},
		{"responses item added twice", DialectResponses, respStream(0, respCreated, respAdded, respAdded, respDone), true, "output_index 0, want 1"},
		{"responses without completed", DialectResponses, respStream(0, respCreated, respAdded, respDeltaA), true, "without response.completed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, problem := CheckStream(tt.d, events(tt.stream), tt.complete)
			if tt.problem == "" {
				if problem != "" {
					t.Fatalf("problem %q in a well-formed stream", problem)
				}
				if tt.complete && text != "a b" {
					t.Fatalf("text %q, want %q", text, "a b")
				}
				return
			}
			if !strings.Contains(problem, tt.problem) {
				t.Fatalf("problem %q, want one about %q", problem, tt.problem)
			}
		})
	}
}

// TestContinuedClass: a complete stream with the relay's seam comment is
// continued; a Want's Text finds the silent truncation and, with Exact,
// the wrong text.
func TestContinuedClass(t *testing.T) {
	obs := func(s string) *Observation {
		var ps LFParser
		o := &Observation{Stream: true, Status: 200, ContentType: sseType, Dialect: DialectChat, Events: ps.Feed([]byte(s))}
		o.Seams = ps.Seams
		return o
	}
	o := obs(chatRole + chatA + chatSeam + chatB + chatStop + chatDone)
	if r := Classify(o); r.Class != Continued || o.Text != "a b" {
		t.Fatalf("got %v (%s), text %q", r.Class, r.Detail, o.Text)
	}
	o = obs(chatRole + chatA + chatB + chatStop + chatDone)
	if r := Classify(o); r.Class != Complete {
		t.Fatalf("without a seam: %v", r.Class)
	}
	o = obs(chatRole + chatA + chatSeam + chatRole + chatB + chatStop + chatDone)
	if r := Classify(o); r.Class != Malformed {
		t.Fatalf("a second role after the seam: %v (%s)", r.Class, r.Detail)
	}

	w := Want{Text: "a b c", Exact: true}
	o = obs(chatRole + chatA + chatSeam + chatB + chatStop + chatDone)
	if r := w.Judge(o, Classify(o)); r.Class != Truncation {
		t.Fatalf("a strict prefix of the answer: %v (%s)", r.Class, r.Detail)
	}
	w = Want{Text: "a c", Exact: true}
	r := w.Judge(o, Classify(o))
	if r.Class != Continued || !strings.Contains(w.Check(o, r), "first difference at byte 2") {
		t.Fatalf("other text: %v, check %q", r.Class, w.Check(o, r))
	}
	w.Exact = false
	if why := w.Check(o, r); why != "" {
		t.Fatalf("not exact: %q", why)
	}
	if why := (Want{Complete: true}).Check(o, r); why != "" {
		t.Fatalf("continued is a complete answer: %q", why)
	}
}
