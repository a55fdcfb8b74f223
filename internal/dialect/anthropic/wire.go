package anthropic

// The endpoints and headers of the Messages API, relative to a base URL
// that ends in /v1.
const (
	// Path is the Messages endpoint.
	Path = "messages"
	// CountTokensPath counts a request's input tokens without running it.
	CountTokensPath = "messages/count_tokens"

	// AuthHeader carries the API key, bare (no "Bearer ").
	AuthHeader = "X-Api-Key"
	// VersionHeader names the API version a request is written for; every
	// request needs one (Version, unless the client or operator pins
	// another).
	VersionHeader = "Anthropic-Version"
	// HeaderPrefix starts every Anthropic-specific request header
	// (anthropic-version, anthropic-beta): they mean nothing to another
	// provider.
	HeaderPrefix = "Anthropic-"
)
