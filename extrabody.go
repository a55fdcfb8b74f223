package llmrelay

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonobj"
)

// fieldExtraBody is the member clients copied from Python samples send
// literally: the OpenAI and Anthropic Python SDKs take extra_body as an
// argument and merge its members into the body they send, so a sample
// reads `extra_body={"reasoning_dispersion": True}`; the Node SDKs have
// no such argument, and a Node client that copies the sample puts
// `extra_body: {...}` into the body itself, where a strict upstream
// refuses it as an unknown parameter.
const fieldExtraBody = "extra_body"

// maxExtraBodyNesting bounds how many extra_body objects found inside the
// merged ones are merged in turn.
const maxExtraBodyNesting = 4

// mergeExtraBody returns b with its top-level extra_body merged in as the
// Python SDKs merge it before sending: each member of extra_body becomes
// a top-level member, replacing one of the same name (a shallow merge:
// `extra_body: {relay: {...}}` replaces the whole of `relay`), and
// extra_body itself goes. An extra_body that is null is only removed; one
// that is not an object is the client's mistake. A body without
// extra_body is returned as it is (merged false), members and all; an
// extra_body inside extra_body is merged too, up to maxExtraBodyNesting
// deep.
//
// b and members are Split's object and members; so are the results.
func mergeExtraBody(b []byte, members []jsonobj.Member) (out []byte, outMembers []jsonobj.Member, merged bool, err error) {
	// The common body has no extra_body: a look at the keys, no map.
	for depth := 0; slices.ContainsFunc(members, isExtraBody); depth++ {
		fields := jsonobj.Map(members)
		extra := fields[fieldExtraBody]
		if depth == maxExtraBodyNesting {
			return nil, nil, false, errInvalidExtraBody("has extra_body objects nested more than 4 deep inside it")
		}
		edits := []jsonobj.Edit{{Key: fieldExtraBody}}
		if string(extra) != "null" {
			inner, err := jsonobj.Split(extra)
			if err != nil {
				return nil, nil, false, errInvalidExtraBody("must be an object whose members are merged into the body, such as {\"reasoning_dispersion\": true}, not " + jsonKind(extra))
			}
			for _, m := range inner {
				edits = append(edits, jsonobj.Edit{Key: m.Key, Value: m.Value})
			}
		}
		if b, err = renderEdited(b, members, fields, edits); err != nil {
			return nil, nil, false, err
		}
		if members, err = jsonobj.Split(b); err != nil {
			return nil, nil, false, errInvalidJSON
		}
		merged = true
	}
	return b, members, merged, nil
}

func isExtraBody(m jsonobj.Member) bool { return m.Key == fieldExtraBody }

// renderEdited is the object b with edits applied: spliced when no key
// repeats, else through the map (the last of equal keys winning, as
// encoding/json decodes it).
func renderEdited(b []byte, members []jsonobj.Member, fields map[string]json.RawMessage, edits []jsonobj.Edit) ([]byte, error) {
	if jsonobj.Unique(members) {
		return bytes.Join(jsonobj.Pieces(nil, b, members, edits), nil), nil
	}
	for _, e := range edits {
		if e.Value == nil {
			delete(fields, e.Key)
		} else {
			fields[e.Key] = e.Value
		}
	}
	return json.Marshal(fields)
}

// jsonKind names the type of a JSON value, for an error message.
func jsonKind(v json.RawMessage) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// errInvalidExtraBody answers an extra_body the relay cannot merge.
func errInvalidExtraBody(why string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_extra_body", Param: fieldExtraBody,
		Message: "The request body's 'extra_body' field " + why + "."}
}
