package sse

import (
	"math/rand/v2"
	"testing"
)

// pieces are the building blocks of random streams: every kind of line
// ending, field names, separators, BOMs and NULs.
var pieces = []string{
	"\n", "\r", "\r\n", "\n\n", "\r\r", "\r\n\r\n",
	"data", "data:", "data: ", "event:", "id:", "id: ", "retry:", "retry: 12", ":", ": c",
	"x", " ", "\x00", "\xEF\xBB\xBF", "\xEF", "[DONE]", "é", "世界",
}

// TestRandomStreams checks, for many random streams and read splits, that
// Raw of the returned blocks concatenates to the input and that the parsed
// fields match the reference parser (see checkInput).
func TestRandomStreams(t *testing.T) {
	forRandomStreams(t, checkInput)
}

// forRandomStreams calls check with many random streams and read splits.
func forRandomStreams(t *testing.T, check func(t *testing.T, in, splits []byte)) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 5000
	if testing.Short() {
		n = 500
	}
	for range n {
		var in []byte
		for range rng.IntN(40) {
			in = append(in, pieces[rng.IntN(len(pieces))]...)
		}
		splits := make([]byte, rng.IntN(5))
		for i := range splits {
			splits[i] = byte(rng.IntN(20))
		}
		check(t, in, splits)
	}
}
