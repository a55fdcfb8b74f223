package splice

import (
	"math/rand"
	"testing"
)

// TestResponsesSpliceMutations runs FuzzResponsesSplice's body on random
// mutations of a stream and a continuation: it found two out-of-range
// slices (a delta that is no string, an open part without an index) that
// the fuzzer, on this loaded machine, had not reached in minutes.
func TestResponsesSpliceMutations(t *testing.T) {
	short := rspBuild("resp_1", []rspItem{{typ: "reasoning", id: "r", text: "think"}, {typ: "message", id: "m", text: "Hello world, again."},
		{typ: "function_call", id: "f", name: "f", text: `{"a":1}`}}, 8)
	cont := rawOf(rspBuild("resp_2", []rspItem{{typ: "reasoning", id: "r2", text: "again"}, {typ: "message", id: "m2", text: "world, again. More"}}, 8))
	first := rawOf(short)
	rnd := rand.New(rand.NewSource(1))
	mut := func(b []byte) []byte {
		b = append([]byte(nil), b...)
		for n := rnd.Intn(5); n >= 0; n-- {
			i := rnd.Intn(len(b))
			switch rnd.Intn(3) {
			case 0:
				b[i] = byte(rnd.Intn(256))
			case 1:
				b = append(b[:i], b[min(len(b), i+rnd.Intn(20)):]...)
			case 2:
				b = append(b[:i], append([]byte("\"{}[]:,0\n"[rnd.Intn(9):][:1]), b[i:]...)...)
			}
		}
		return b
	}
	runs := 5000
	if testing.Short() {
		runs = 500
	}
	for n := 0; n < runs; n++ {
		a, c := mut(first), mut(cont)
		k, j, fl := uint8(rnd.Intn(80)), uint8(rnd.Intn(80)), uint8(rnd.Intn(8))
		fuzzResponses(t, a, c, k, j, fl)
	}
}
