package responses

import "github.com/llmrelay/caddy-llm-relay/internal/sse"

// The event types FromChatStream makes.
const (
	evCreated          = "response.created"
	evInProgress       = "response.in_progress"
	evItemAdded        = "response.output_item.added"
	evItemDone         = "response.output_item.done"
	evSummaryPartAdded = "response.reasoning_summary_part.added"
	evSummaryDelta     = "response.reasoning_summary_text.delta"
	evSummaryDone      = "response.reasoning_summary_text.done"
	evSummaryPartDone  = "response.reasoning_summary_part.done"
	evContentPartAdded = "response.content_part.added"
	evTextDelta        = "response.output_text.delta"
	evTextDone         = "response.output_text.done"
	evRefusalDelta     = "response.refusal.delta"
	evRefusalDone      = "response.refusal.done"
	evContentPartDone  = "response.content_part.done"
	evArgsDelta        = "response.function_call_arguments.delta"
	evArgsDone         = "response.function_call_arguments.done"
	evCompleted        = "response.completed"
	evIncomplete       = "response.incomplete"
	evFailed           = "response.failed"
	evError            = "error"
)

// streamEvents makes the events the translators write (see
// sse.Templates): the Responses event types, and Chat chunks and [DONE].
var streamEvents = sse.NewTemplates(evCreated, evInProgress, evItemAdded, evItemDone, evSummaryPartAdded,
	evSummaryDelta, evSummaryDone, evSummaryPartDone, evContentPartAdded, evTextDelta, evTextDone,
	evRefusalDelta, evRefusalDone, evContentPartDone, evArgsDelta, evArgsDone, evCompleted, evIncomplete, evFailed, evError, "")
