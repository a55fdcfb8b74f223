package sse

import "testing"

// fuzzSeeds are inputs that exercise the tricky corners of the parser.
var fuzzSeeds = []string{
	"",
	"data: x\n\n",
	"data: a\r\ndata: b\r\n\r\n",
	"data: a\rdata: b\r\r",
	"data: a\r\r\ndata: b\n\r\n\r",
	"\r\n\r\n\ndata: x\r\n\r\n\r\n",
	": keep-alive\n\n: ping\r\n\r\n",
	"data\ndata:\ndata: \ndata:  x\n\n",
	"\xEF\xBB\xBFdata: x\n\n",
	"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n",
	"\xEF\xBB",
	"\xEF\xBB\xBF",
	"\xEF\xBB\xBF\n",
	"id: a\x00b\ndata: x\n\nid\n\nid: 7\n\n",
	"retry: 1000\n\nretry: 10a\n\nretry:\n\nretry: 99999999999999999999999\n\n",
	"event: ping\nevent: pong\ndata: x\n\n",
	"foo: bar\n\n",
	"data: [DONE]",
	"data: [DONE]\r",
	"data: a\n\ndata: [DONE]\n",
	"data: h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C\n\n",
	"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n",
}

// FuzzReader feeds arbitrary bytes through the reader with arbitrary read
// splits (sizes taken from splits) and checks that nothing panics, that Raw
// of the blocks concatenates to the input, and that every block's fields
// match the whole-input reference parser; see checkInput.
func FuzzReader(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), []byte(nil))
		f.Add([]byte(s), []byte{0})
		f.Add([]byte(s), []byte{byte(i), 2, 1})
	}
	f.Fuzz(func(t *testing.T, in, splits []byte) {
		checkInput(t, in, splits)
	})
}
