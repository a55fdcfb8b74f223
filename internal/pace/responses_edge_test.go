package pace

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// Events of unusual shape are renumbered too: data over several lines, a
// comment line, CRLF line ends, an id line. Only the number changes in
// what the data means.
func TestResponsesRenumberOddShapes(t *testing.T) {
	text := "event: response.output_text.delta\ndata: " + `{"type":"response.output_text.delta","sequence_number":5,"item_id":"m","output_index":0,"content_index":0,"delta":"` + strings.Repeat("split me ", 40) + `"}` + "\n\n"
	odd := []struct{ name, raw, data string }{
		{"two data lines", "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\ndata: \"sequence_number\":6,\"output_index\":1}\n\n",
			`{"type":"response.output_item.added", "sequence_number":0,"output_index":1}`},
		{"comment line", "event: response.content_part.added\n: note\ndata: {\"type\":\"response.content_part.added\",\"sequence_number\":7}\n\n",
			`{"type":"response.content_part.added","sequence_number":0}`},
		{"crlf", "event: response.output_text.done\r\ndata: {\"type\":\"response.output_text.done\",\"sequence_number\":8,\"text\":\"t\"}\r\n\r\n",
			`{"type":"response.output_text.done","sequence_number":0,"text":"t"}`},
		{"id line", "id: 42\nevent: response.output_item.done\ndata: {\"sequence_number\":9,\"type\":\"response.output_item.done\"}\n\n",
			`{"sequence_number":0,"type":"response.output_item.done"}`},
	}
	raw := text
	for _, o := range odd {
		raw += o.raw
	}
	raw += rx(`{"type":"response.completed","sequence_number":10,"response":{}}`)
	var arrs []arrival
	for _, ev := range readEvents(t, raw) {
		arrs = append(arrs, arrival{at: 0, ev: ev})
	}
	ems, _ := simulate(t, Config{Mode: ModePace, Format: FormatResponses}, arrs)
	v := viewResponses(t, emitted(ems))
	checkSeqs(t, "odd shapes", v.seqs, 5)
	if v.textEvents < 2 || v.text[0].String() != strings.Repeat("split me ", 40) {
		t.Fatalf("%d text events, text %q", v.textEvents, v.text[0].String())
	}
	for i, o := range odd {
		ev := v.events[v.textEvents+i]
		var got, want map[string]any
		if json.Unmarshal(ev.Data, &got) != nil || json.Unmarshal([]byte(o.data), &want) != nil {
			t.Fatalf("%s: data %q", o.name, ev.Data)
		}
		want["sequence_number"] = float64(5 + v.textEvents + i)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: data %q, want %v", o.name, ev.Data, want)
		}
	}
	if last := v.events[len(v.events)-1]; last.HasID || v.events[len(v.events)-2].ID != "42" {
		t.Fatalf("id line lost or moved")
	}
}
