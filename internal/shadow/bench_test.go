package shadow

import (
	"strings"
	"testing"
)

// answer2K builds a ~2 KB English-like answer; variant changes every
// seventh word.
func answer2K(variant string) string {
	words := strings.Fields(`The relay forwards the request to the first upstream in the chain and
		streams the answer back as server-sent events while it measures the time to first token
		and the pace of the stream so that a slow or failing upstream can be replaced`)
	var b strings.Builder
	for i := 0; b.Len() < 2048; i++ {
		w := words[i%len(words)]
		if i%7 == 0 {
			w = variant + w
		}
		b.WriteString(w)
		if i%12 == 11 {
			b.WriteString(". ")
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

func BenchmarkSimilarity2KB(b *testing.B) {
	x, y := answer2K(""), answer2K("re")
	b.SetBytes(int64(len(x) + len(y)))
	b.ReportAllocs()
	for b.Loop() {
		Similarity(x, y)
	}
	b.ReportMetric(Similarity(x, y), "similarity")
}

func BenchmarkSimilarity2KBCJK(b *testing.B) {
	x := strings.Repeat("模型的回答以流的方式返回，中继会测量首个词元的时间。", 30)
	y := strings.Repeat("模型的答案以流的方式返回，代理会测量第一个词元的时间。", 30)
	b.SetBytes(int64(len(x) + len(y)))
	b.ReportAllocs()
	for b.Loop() {
		Similarity(x, y)
	}
	b.ReportMetric(Similarity(x, y), "similarity")
}

// BenchmarkRunnerGoFull measures Go when every slot is taken: the drop path.
func BenchmarkRunnerGoFull(b *testing.B) {
	r := NewRunner(4)
	release := make(chan struct{})
	for range 4 {
		r.Go(func() { <-release })
	}
	f := func() {}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r.Go(f) {
				b.Error("started a copy when full")
			}
		}
	})
	close(release)
	r.Wait()
}

func BenchmarkRunnerGoFullSerial(b *testing.B) {
	r := NewRunner(1)
	release := make(chan struct{})
	r.Go(func() { <-release })
	f := func() {}
	b.ReportAllocs()
	for b.Loop() {
		r.Go(f)
	}
	close(release)
	r.Wait()
}
