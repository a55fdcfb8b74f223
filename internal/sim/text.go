package sim

// The generated text is a pure function of the Config (seed and token
// counts), the same for every request, so a test can compute exactly
// what will be streamed with Texts.

// Vocabulary classes and their weights (out of 100). The mix exercises
// what relays get wrong: multi-byte and multi-codepoint characters,
// combining marks, JSON escapes, and newlines.
var vocabulary = []struct {
	weight int
	pieces []string
}{
	{55, []string{
		" the", " model", " relay", " stream", " token", " reasoning", " is",
		" a", " of", " and", " to", " answer", " we", " check", " first",
		" then", " because", " latency", " upstream", " think", " so", " it",
		" data", " fast", " slow", " step", " result", " ok", "Let", " us",
	}},
	{15, []string{
		".", ",", ":", ";", "?", "!", " (", ")", " -", "\n", "\n\n", " \"",
		"\"", "'s", " 42", " 3.14", " <b>", " &", " \\", "\t",
	}},
	{12, []string{
		"你好", "推理", "模型", "。", "，", "数据", "流", "日本語", "です", "한국어",
	}},
	{10, []string{
		" 👨‍👩‍👧", "👨‍👩‍👧", " 🇯🇵", "👍🏽", " 🙂", "🚀", "❤️",
	}},
	{8, []string{
		" café",       // precomposed é (U+00E9)
		" cafe\u0301", // e + combining acute (U+0301)
		" naïve", " résumé", "é", "e\u0301", " Ångström",
	}},
}

// Texts returns the token pieces of the reasoning and content phases
// that a Server built from cfg sends: one piece per delta. Joining each
// slice gives the exact full text of that phase. Defaults are applied
// as New does, so Texts(Config{}) describes a default Server.
func Texts(cfg Config) (reasoning, content []string) {
	cfg = cfg.withDefaults()
	return pieces(cfg.Seed, 1, *cfg.ReasoningTokens), pieces(cfg.Seed, 2, *cfg.ContentTokens)
}

// pieces draws n pieces from the vocabulary with a generator seeded by
// (seed, phase), so each phase's text does not depend on the other's
// length.
func pieces(seed int64, phase uint64, n int) []string {
	if n <= 0 {
		return nil
	}
	r := newRNG(uint64(seed), phase)
	out := make([]string, n)
	for i := range out {
		w := int(r.next() % 100)
		for _, class := range vocabulary {
			if w < class.weight {
				out[i] = class.pieces[r.next()%uint64(len(class.pieces))]
				break
			}
			w -= class.weight
		}
	}
	return out
}

// rng is splitmix64: tiny, fast, and with a fixed algorithm so the text
// and fault draws for a seed never change across Go versions.
type rng struct{ state uint64 }

func newRNG(keys ...uint64) *rng {
	r := &rng{state: 0x9e3779b97f4a7c15}
	for _, k := range keys {
		r.state ^= k
		r.state = r.next()
	}
	return r
}

func (r *rng) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float returns a uniform float64 in [0, 1).
func (r *rng) float() float64 {
	return float64(r.next()>>11) / (1 << 53)
}
