package chat

// The endpoints and headers of OpenAI Chat Completions, relative to a
// base URL that ends in /v1 (OpenAI's, or any provider that copies it).
const (
	// Path is the Chat Completions endpoint.
	Path = "chat/completions"
	// CompletionsPath is the legacy text completions endpoint, which the
	// relay passes through to Chat providers.
	CompletionsPath = "completions"

	// AuthHeader carries the API key as AuthScheme + key.
	AuthHeader = "Authorization"
	AuthScheme = "Bearer "
)
