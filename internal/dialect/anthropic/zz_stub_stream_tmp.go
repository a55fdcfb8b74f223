package anthropic

// TEMPORARY stubs of the stream translators; removed when stream.go lands.

import "github.com/llmrelay/caddy-llm-relay/internal/sse"

type Source interface{ Next() (sse.Event, error) }

type ChatStreamOptions struct {
	Model        string
	Created      int64
	IncludeUsage bool
}

type MessagesStreamOptions struct {
	Model       string
	InputTokens int
}

func ChatStream(src Source, opt ChatStreamOptions) Source         { return src }
func MessagesStream(src Source, opt MessagesStreamOptions) Source { return src }
