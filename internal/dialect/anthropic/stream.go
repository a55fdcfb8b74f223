package anthropic

import "github.com/llmrelay/caddy-llm-relay/internal/sse"

// streamEvents makes the events the translators write (see
// sse.Templates): Chat chunks and [DONE], and the Messages event types.
var streamEvents = sse.NewTemplates("", "message_start", "content_block_start", "content_block_delta",
	"content_block_stop", "message_delta", "message_stop", "error")
