package llmrelay

import (
	"net/url"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
)

// testEndpoint is the endpoint of a request to /v1/<rest>.
func testEndpoint(rest string) endpoint {
	ep, _ := endpointOf(&url.URL{Path: "/v1/" + rest})
	return ep
}

// TestEndpointOf: every path the relay serves is the kind of endpoint it
// is, in the client's dialect, and says what the relay does with it.
func TestEndpointOf(t *testing.T) {
	type want struct {
		kind                                   endpointKind
		dialect                                dialect
		conversation, chatRules, endsWithEvent bool
		format                                 pace.Format
		effort                                 effortForm
		budgetFailoverOnStream, assemblesTrace bool
	}
	for path, w := range map[string]want{
		"/v1/chat/completions":        {kindChat, dialectChat, true, true, true, pace.FormatChat, effortFlat, true, true},
		"/v1/completions":             {kindCompletions, dialectChat, false, true, true, pace.FormatChat, effortFlat, true, false},
		"/v1/messages":                {kindMessages, dialectMessages, true, false, true, pace.FormatMessages, effortThinking, false, false},
		"/v1/messages/count_tokens":   {kindCountTokens, dialectMessages, false, false, false, pace.FormatChat, effortNone, false, false},
		"/v1/messages/batches":        {kindPassthrough, dialectMessages, false, false, false, pace.FormatChat, effortNone, false, false},
		"/v1/responses":               {kindResponses, dialectResponses, true, false, true, pace.FormatResponses, effortNested, false, false},
		"/v1/responses/resp_1":        {kindStored, dialectChat, false, false, false, pace.FormatChat, effortNone, true, false},
		"/v1/models":                  {kindModels, dialectChat, false, false, false, pace.FormatChat, effortNone, true, false},
		"/v1/models/gpt-x":            {kindModels, dialectChat, false, false, false, pace.FormatChat, effortNone, true, false},
		"/v1/balance":                 {kindBalance, dialectChat, false, false, false, pace.FormatChat, effortNone, true, false},
		"/v1/embeddings":              {kindPassthrough, dialectChat, false, false, false, pace.FormatChat, effortNone, true, false},
		"/prefix/v1/chat/completions": {kindChat, dialectChat, true, true, true, pace.FormatChat, effortFlat, true, true},
		"/v2/chat/completions":        {kindUnknown, dialectChat, false, false, false, pace.FormatChat, effortNone, true, false},
	} {
		u, _ := url.Parse(path)
		ep, bad := endpointOf(u)
		got := want{ep.kind, ep.dialect, ep.conversation(), ep.chatRules(), ep.endsWithEvent(), ep.format(), ep.effort(), ep.budgetFailoverOnStream(), ep.assemblesTrace()}
		if bad || got != w {
			t.Errorf("%s: %+v (bad %v), want %+v", path, got, bad, w)
		}
	}
	u, _ := url.Parse("/v1/messages/..%2fx")
	if ep, bad := endpointOf(u); !bad || ep.dialect != dialectMessages {
		t.Errorf("a path the relay refuses: bad %v, dialect %v; want bad, in the Messages client's dialect", bad, ep.dialect)
	}
}

// TestEndpointBeforeContent: the events each endpoint holds back before
// the commit point.
func TestEndpointBeforeContent(t *testing.T) {
	for _, c := range []struct {
		rest, typ string
		want      bool
	}{
		{restMessages, "message_start", true}, {restMessages, "ping", true}, {restMessages, "content_block_delta", false},
		{restResponses, "response.created", true}, {restResponses, "response.output_item.added", true},
		{restResponses, "response.output_text.delta", false}, {restChat, "message_start", false}, {restChat, "", false},
	} {
		if got := testEndpoint(c.rest).beforeContent(c.typ); got != c.want {
			t.Errorf("%s, %q: %v, want %v", c.rest, c.typ, got, c.want)
		}
	}
}
