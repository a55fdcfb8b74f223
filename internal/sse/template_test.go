package sse

import (
	"reflect"
	"strings"
	"testing"
)

// TestTemplatesEventIsNewEvent: an event made from a template is the one
// NewEvent makes, field for field, for the types templated and the rest.
func TestTemplatesEventIsNewEvent(t *testing.T) {
	tmpl := NewTemplates("", "message_start", "content_block_start", "content_block_delta",
		"content_block_stop", "message_delta", "message_stop", "error")
	for _, c := range []struct{ typ, data string }{
		{"", "[DONE]"},
		{"", `{"a":"b"}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`},
		{"message_stop", `{"type":"message_stop"}`},
		{"x", ""},
		{"", ""},
		{"message_start", `{"type":"message_start"}`},
		{"content_block_start", `{}`},
		{"content_block_stop", `{}`},
		{"message_delta", `{}`},
		{"error", `{"type":"error"}`},
		{"", "two\nlines"},
		{"error", "cr\rlf\r\n"},
		{"event\nsplit", "x"},
		{"", strings.Repeat("y", 10000)},
	} {
		got := tmpl.Event(c.typ, []byte(c.data))
		want := NewEvent(c.typ, []byte(c.data))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Templates.Event(%q, %q) = %+v, want %+v", c.typ, c.data, got, want)
		}
	}
}
