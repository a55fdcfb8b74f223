package pace

// TEMPORARY: replaced by the pacemsg helper's Format.
type Format uint8

const (
	FormatChat Format = iota
	FormatMessages
)
