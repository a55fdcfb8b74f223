package splice

// STUB: replaced by the Responses helper (responses.go).
func newResponsesRecorder(maxBytes int) Recorder { return newPassRecorder() }
