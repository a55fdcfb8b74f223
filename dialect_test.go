package llmrelay

import (
	"errors"
	"reflect"
	"testing"
)

// TestCodecsComplete: every dialect has a codec, with every direction
// set (a direction a dialect lacks says so when called).
func TestCodecsComplete(t *testing.T) {
	for d := range dialect(len(codecs)) {
		v := reflect.ValueOf(*d.codec())
		for i := range v.NumField() {
			if v.Field(i).IsNil() {
				t.Errorf("dialect %s: %s is nil", d, v.Type().Field(i).Name)
			}
		}
	}
}

// TestTranslateRequestNotSupported: a request a codec has no direction
// for is one the target cannot be sent, as one its dialect cannot
// express: the target is passed over.
func TestTranslateRequestNotSupported(t *testing.T) {
	x := exchange{client: dialectChat, upstream: dialectResponses, api: apiOpenAI}
	_, err := x.translateRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if _, ok := errors.AsType[*untranslatableError](err); !ok {
		t.Fatalf("err %v, want an *untranslatableError", err)
	}
}
