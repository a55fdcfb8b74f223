// Package genai holds what the relay's OpenTelemetry spans need of the
// GenAI semantic conventions: the attribute names, the provider and
// operation names, the facts an answer's events give (its id, model and
// finish reasons) and the bounded message forms recorded when an operator
// opts in to content. Pure: bytes and strings in, values out; no
// OpenTelemetry import, no clock.
//
// The version followed is pinned: the GenAI conventions of
// open-telemetry/semantic-conventions v1.41.0 (docs/gen-ai), the last
// release before they moved to their own repository, whose names the
// relay's users' backends read today. All of them are marked
// Development there.
package genai

import (
	"net"
	"net/url"
	"strconv"
	"strings"
)

// SchemaURL is the version the attribute names below follow.
const SchemaURL = "https://opentelemetry.io/schemas/1.41.0"

// Attribute names of the conventions (v1.41.0).
const (
	OperationName         = "gen_ai.operation.name"
	ProviderNameKey       = "gen_ai.provider.name"
	RequestModel          = "gen_ai.request.model"
	RequestMaxTokens      = "gen_ai.request.max_tokens"
	RequestTemperature    = "gen_ai.request.temperature"
	RequestTopP           = "gen_ai.request.top_p"
	RequestStream         = "gen_ai.request.stream"
	ResponseID            = "gen_ai.response.id"
	ResponseModel         = "gen_ai.response.model"
	ResponseFinishReasons = "gen_ai.response.finish_reasons"
	ResponseTimeToFirst   = "gen_ai.response.time_to_first_chunk"
	UsageInputTokens      = "gen_ai.usage.input_tokens"
	UsageOutputTokens     = "gen_ai.usage.output_tokens"
	UsageCacheRead        = "gen_ai.usage.cache_read.input_tokens"
	UsageCacheCreation    = "gen_ai.usage.cache_creation.input_tokens"
	UsageReasoning        = "gen_ai.usage.reasoning.output_tokens"
	InputMessages         = "gen_ai.input.messages"
	OutputMessages        = "gen_ai.output.messages"
	ServerAddress         = "server.address"
	ServerPort            = "server.port"
	ErrorType             = "error.type"
)

// Operation names.
const (
	OpChat            = "chat"
	OpGenerateContent = "generate_content"
	OpTextCompletion  = "text_completion"
	OpEmbeddings      = "embeddings"
)

// Operation is the operation name of a request to an upstream of api
// (openai, chat, anthropic, gemini) at rest, the path after its base URL:
// a conversation is chat (generate_content for Gemini, as the
// conventions name its API), completions text_completion, embeddings
// embeddings; any other endpoint passed through is named by its path.
func Operation(api, rest string) string {
	rest = strings.Trim(rest, "/")
	switch {
	case api == "gemini":
		return OpGenerateContent
	case rest == "chat/completions" || rest == "messages" || rest == "responses" || rest == "":
		return OpChat
	case rest == "completions":
		return OpTextCompletion
	case rest == "embeddings":
		return OpEmbeddings
	}
	rest, _, _ = strings.Cut(rest, "?")
	return rest
}

// hostProviders names the providers of well-known API hosts, by the
// suffix of the host: the conventions' values where they have one.
var hostProviders = []struct{ suffix, name string }{
	{"api.openai.com", "openai"},
	{"openai.azure.com", "azure.ai.openai"},
	{"services.ai.azure.com", "azure.ai.inference"},
	{"api.anthropic.com", "anthropic"},
	{"generativelanguage.googleapis.com", "gcp.gemini"},
	{"aiplatform.googleapis.com", "gcp.vertex_ai"},
	{"api.deepseek.com", "deepseek"},
	{"api.groq.com", "groq"},
	{"api.mistral.ai", "mistral_ai"},
	{"api.x.ai", "x_ai"},
	{"api.perplexity.ai", "perplexity"},
	{"api.cohere.com", "cohere"},
	{"api.cohere.ai", "cohere"},
	{"amazonaws.com", "aws.bedrock"},
}

// ProviderName is gen_ai.provider.name for an upstream: override when the
// operator set one; the provider of a well-known host; else the API the
// upstream speaks. The conventions ask an OpenAI-compatible client that
// cannot tell the provider to say "openai" (a self-hosted server speaking
// Chat Completions included), and likewise "anthropic" and "gcp.gemini"
// for the others' wire formats.
func ProviderName(override, api, baseURL string) string {
	if override != "" {
		return override
	}
	host := baseURL
	if u, err := url.Parse(baseURL); err == nil && u.Host != "" {
		host = u.Hostname()
	}
	host = strings.ToLower(host)
	for _, p := range hostProviders {
		if host == p.suffix || strings.HasSuffix(host, "."+p.suffix) {
			return p.name
		}
	}
	switch api {
	case "anthropic":
		return "anthropic"
	case "gemini":
		return "gcp.gemini"
	}
	return "openai"
}

// Server is server.address and server.port of a base URL (port 0: none
// could be told).
func Server(baseURL string) (host string, port int) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return "", 0
	}
	host = u.Hostname()
	if p := u.Port(); p != "" {
		port, _ = strconv.Atoi(p)
	} else if u.Scheme == "https" {
		port = 443
	} else if u.Scheme == "http" {
		port = 80
	}
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	return host, port
}

// ErrorTypeOf is error.type for a failed attempt: the HTTP status code
// when the upstream answered one (as the HTTP conventions record it),
// else the relay's failure class (timeout, connect, stream, ...): few
// values, as the conventions want.
func ErrorTypeOf(class string, status int) string {
	if status >= 400 {
		return strconv.Itoa(status)
	}
	if class == "" {
		return "_OTHER"
	}
	return class
}
