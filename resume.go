package llmrelay

// resumer is the relay's resumable streams (see Resume): the store and
// the settings resolved at Provision.
type resumer struct {
	store streamStore
}
