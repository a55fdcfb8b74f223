package anthropic

// MessagesStreamOptions configures MessagesStream.
type MessagesStreamOptions struct {
	Model       string
	InputTokens int
}

// MessagesStream is not written yet: it passes src through.
func MessagesStream(src Source, opt MessagesStreamOptions) Source { return src }
