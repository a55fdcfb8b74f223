package gemini

import (
	"net/url"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// The endpoints and headers of the Gemini API, relative to a base URL
// that ends in /v1beta (or /v1). The model is in the path, not the body:
// POST models/{model}:generateContent.
const (
	// GenerateMethod answers a request whole.
	GenerateMethod = "generateContent"
	// StreamMethod answers a request as a stream: SSE with ?alt=sse (the
	// only form the relay speaks upstream), a JSON array without it.
	StreamMethod = "streamGenerateContent"
	// CountTokensMethod counts a request's input tokens.
	CountTokensMethod = "countTokens"
	// ModelsPath lists the models (GET).
	ModelsPath = "models"

	// AuthHeader carries the API key, bare (no "Bearer ").
	AuthHeader = "X-Goog-Api-Key"
)

// Path is the endpoint of method for model, relative to the base URL:
// "models/gemini-2.5-flash:streamGenerateContent?alt=sse" for StreamMethod
// (SSE, what ToChatStream reads), "models/m:generateContent" otherwise.
// A model named "models/…" (as the models list spells them) is not
// prefixed twice.
func Path(model, method string) string {
	if len(model) > len("models/") && model[:len("models/")] == "models/" {
		model = model[len("models/"):]
	}
	p := "models/" + url.PathEscape(model) + ":" + method
	if method == StreamMethod {
		p += "?alt=sse"
	}
	return p
}

// streamEvents makes the events the translators write (see
// sse.Templates): Gemini chunks and Chat chunks are both bare data events.
var streamEvents = sse.NewTemplates("")
