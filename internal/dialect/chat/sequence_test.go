package chat

import (
	"fmt"
	"strings"
	"testing"
)

// recSink records what a Sequencer does, one line per call, checking that
// items are opened one at a time.
type recSink struct {
	log  []string
	open *Item
	t    *testing.T
}

func name(it *Item) string {
	if it == nil {
		return "-"
	}
	switch it.Kind {
	case ItemText:
		return "text"
	case ItemReasoning:
		return "reasoning"
	case ItemRefusal:
		return "refusal"
	}
	return fmt.Sprintf("call%d(%s,%s)", it.Call, it.ID, it.Name)
}

func (r *recSink) OpenItem(it *Item) {
	if r.open != nil {
		r.t.Fatalf("%s opened while %s is open", name(it), name(r.open))
	}
	r.open = it
	r.log = append(r.log, "open "+name(it))
}

func (r *recSink) WriteItem(it *Item, b []byte) {
	if it != r.open {
		r.t.Fatalf("write to %s while %s is open", name(it), name(r.open))
	}
	r.log = append(r.log, "write "+string(b))
}

func (r *recSink) CloseItem(it, next *Item) {
	if it != r.open {
		r.t.Fatalf("close %s while %s is open", name(it), name(r.open))
	}
	r.open = nil
	r.log = append(r.log, "close "+name(it)+" next "+name(next))
}

func (r *recSink) take() string {
	s := strings.Join(r.log, "; ")
	r.log = nil
	return s
}

func newSeq(t *testing.T) (*Sequencer, *recSink) {
	r := &recSink{t: t}
	return &Sequencer{Sink: r}, r
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// step is one input and what must come out of it right away.
type step struct {
	text *[2]string // kind name, text
	call *CallDelta
	want string
}

func txt(kind, s, want string) step { return step{text: &[2]string{kind, s}, want: want} }
func frag(i int, id, nm, args, want string) step {
	return step{call: &CallDelta{Index: i, ID: id, Name: nm, Args: args}, want: want}
}

func run(t *testing.T, steps []step, flush string) {
	t.Helper()
	s, r := newSeq(t)
	kinds := map[string]ItemKind{"text": ItemText, "reasoning": ItemReasoning, "refusal": ItemRefusal}
	for i, st := range steps {
		if st.text != nil {
			must(t, s.Text(kinds[st.text[0]], []byte(st.text[1])))
		} else {
			must(t, s.Call(st.call))
		}
		if got := r.take(); got != st.want {
			t.Fatalf("step %d:\n got  %s\n want %s", i, got, st.want)
		}
	}
	s.Flush()
	if got := r.take(); got != flush {
		t.Fatalf("flush:\n got  %s\n want %s", got, flush)
	}
}

func TestSequencerStreamsWhatIsNotInterleaved(t *testing.T) {
	run(t, []step{
		txt("reasoning", "hm", "open reasoning; write hm"),
		txt("text", "A", "close reasoning next text; open text; write A"),
		txt("text", "B", "write B"),
		frag(0, "a", "f", `{"x":`, "close text next call0(a,f); open call0(a,f); write {\"x\":"),
		frag(0, "", "", `1}`, "write 1}"),
		frag(1, "b", "g", `{}`, "close call0(a,f) next call1(b,g); open call1(b,g); write {}"),
		frag(2, "c", "h", ``, "close call1(b,g) next call2(c,h); open call2(c,h)"),
	}, "close call2(c,h) next -")
}

func TestSequencerHoldsInterleavedCalls(t *testing.T) {
	run(t, []step{
		frag(0, "a", "f", ``, "open call0(a,f)"),
		frag(1, "b", "g", ``, ""),
		frag(2, "c", "h", ``, ""),
		frag(1, "", "", `{"y":`, ""),
		frag(0, "", "", `{"x"`, `write {"x"`),
		frag(2, "", "", `{}`, ""),
		frag(1, "", "", `2}`, ""),
		// a completes: it closes, and b and c, whole already, follow.
		frag(0, "", "", `:1}`, `write :1}; close call0(a,f) next call1(b,g); open call1(b,g); write {"y":2}; close call1(b,g) next call2(c,h); open call2(c,h); write {}`),
	}, "close call2(c,h) next -")
}

func TestSequencerHoldsTextInsideACall(t *testing.T) {
	run(t, []step{
		frag(0, "a", "f", `{"x":`, `open call0(a,f); write {"x":`),
		txt("text", "Let ", ""),
		txt("text", "me", ""),
		frag(0, "", "", `"}"`, `write "}"`), // a brace in a string ends nothing
		frag(0, "", "", `}`, "write }; close call0(a,f) next text; open text; write Let me"),
		txt("text", "!", "write !"),
	}, "close text next -")
}

func TestSequencerCallsWithoutIndex(t *testing.T) {
	// Every call is index 0; ids tell them apart, and fragments without
	// one go to the latest.
	run(t, []step{
		frag(0, "a", "f", `{"x":`, `open call0(a,f); write {"x":`),
		frag(0, "", "", `1}`, "write 1}"),
		frag(0, "b", "g", `{`, "close call0(a,f) next call1(b,g); open call1(b,g); write {"),
		frag(0, "a", "", ` `, ""), // a's id again, only whitespace: dropped
		frag(0, "b", "g", `}`, "write }"),
	}, "close call1(b,g) next -")
	// The id in every fragment, interleaved.
	run(t, []step{
		frag(0, "a", "f", `{"x":`, `open call0(a,f); write {"x":`),
		frag(0, "b", "g", `{}`, ""),
		frag(0, "a", "f", `1}`, `write 1}; close call0(a,f) next call1(b,g); open call1(b,g); write {}`),
	}, "close call1(b,g) next -")
}

func TestSequencerWaitsForAName(t *testing.T) {
	run(t, []step{
		frag(0, "", "", `{"x"`, ""),
		txt("text", "T", ""),
		frag(0, "a", "f", `:1}`, `open call0(a,f); write {"x"; write :1}; close call0(a,f) next text; open text; write T`),
	}, "close text next -")
	// At the end a call is written without one.
	run(t, []step{frag(0, "", "", `{}`, "")}, "open call0(,); write {}; close call0(,) next -")
}

func TestSequencerFlushesInOrder(t *testing.T) {
	run(t, []step{
		frag(0, "a", "f", `{"x":`, `open call0(a,f); write {"x":`),
		txt("refusal", "no", ""),
		frag(1, "b", "g", `[`, ""),
		txt("reasoning", "r", ""),
	}, "close call0(a,f) next refusal; open refusal; write no; close refusal next call1(b,g); open call1(b,g); write [; close call1(b,g) next reasoning; open reasoning; write r; close reasoning next -")
}

func TestSequencerLateArguments(t *testing.T) {
	s, _ := newSeq(t)
	must(t, s.Call(&CallDelta{ID: "a", Name: "f", Args: "{}"}))
	must(t, s.Text(ItemText, []byte("x"))) // a is whole: closed
	must(t, s.Call(&CallDelta{ID: "a", Args: "\n "}))
	must(t, s.Call(&CallDelta{Name: "f"}))
	err := s.Call(&CallDelta{Args: `"more"`})
	if ue, ok := err.(*UnreadableError); !ok || !strings.Contains(ue.Reason, "after it ended") {
		t.Fatalf("err %v", err)
	}
	s, _ = newSeq(t)
	must(t, s.Call(&CallDelta{ID: "a", Name: "f", Args: "{}"}))
	s.Flush()
	if err := s.Call(&CallDelta{Args: "1"}); err == nil {
		t.Fatal("arguments after the finish passed")
	}
}

func TestSequencerBoundsWhatItHolds(t *testing.T) {
	s, _ := newSeq(t)
	must(t, s.Call(&CallDelta{ID: "a", Name: "f", Args: "{"}))
	big := []byte(strings.Repeat("x", 1<<20))
	var err error
	for i := 0; i <= MaxHeld>>20 && err == nil; i++ {
		err = s.Text(ItemText, big)
	}
	if _, ok := err.(*UnreadableError); !ok {
		t.Fatalf("err %v after holding %d bytes", err, s.held)
	}
}

func TestJSONEnd(t *testing.T) {
	for in, want := range map[string]bool{
		`{}`: true, ` {"a":[1,{"b":"}"}]} `: true, `[1]`: true, `{"a":"\"}"}`: true, `{"a":"\\"}`: true,
		``: false, `{`: false, `{"a":"}`: false, `1`: false, `"x"`: false, `{} x`: false, `{}{}`: false, `{"a":"\\\"}"`: false,
	} {
		for cut := 0; cut <= len(in); cut++ { // any split gives the same
			var j jsonEnd
			j.feed(in[:cut])
			j.feed(in[cut:])
			if j.complete() != want {
				t.Errorf("%q split at %d: complete %v, want %v", in, cut, j.complete(), want)
			}
		}
	}
}
