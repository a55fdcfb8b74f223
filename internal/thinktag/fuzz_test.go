package thinktag

import "testing"

// fuzzSeeds are texts in the shapes the model families write, and the
// corners of the rules.
var fuzzSeeds = []string{
	"",
	"Hello, world.",
	"<think>\nLet me see.\n</think>\n\nThe answer is 4.",
	"Okay, the user wants 2+2.\n</think>\n\n4",
	"<think>\n\n</think>\n\nAnswer",
	"<think>a</think>\n\nx<think>b</think>y",
	"<think>Write <think> in the template.</think>ok",
	"I need to read the file.\n\n<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>",
	"Use the <think> tag.</think> Like <think>this</think>.",
	" \n<think>r</think>a",
	"◁think▷用户问◁/think▷答案",
	"<seed:think>plan</seed:think>do",
	"<think>\r\nr\r\n</think>\r\n\r\nanswer",
	"a<<think>b</think>",
	"<a>x</a>by<|t|>z<|t|>§w¶",
	"日\xe6\x9c\xac</thi",
}

// FuzzSplit feeds arbitrary text in arbitrary pieces (sizes taken from
// cuts, 0 an empty piece) under the configuration which picks, and checks
// the chunking invariance, the promptness and the hold bound against the
// reference (see checkCuts).
func FuzzSplit(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), []byte{1, 2, 3, 5, 7, 11}, uint8(i))
		f.Add([]byte(s), []byte(nil), uint8(i+3))
	}
	f.Fuzz(func(t *testing.T, text, sizes []byte, which uint8) {
		// The promptness check runs the reference after every piece:
		// keep it quadratic in something small.
		if len(text) > 1<<10 || len(sizes) > 1<<8 {
			return
		}
		var cuts []int
		at := 0
		for _, n := range sizes {
			at += int(n % 16)
			if at > len(text) {
				break
			}
			cuts = append(cuts, at)
		}
		checkCuts(t, configs[int(which)%len(configs)], text, cuts)
	})
}
