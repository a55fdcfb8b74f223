//go:build race

package splice

// messagesRace: the race detector makes the recordings' property test
// ~15 times slower; it then breaks at every third event.
const messagesRace = true
