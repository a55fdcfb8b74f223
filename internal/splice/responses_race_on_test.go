//go:build race

package splice

// rspRace: the race detector is on (the property test samples fewer
// second breaks: it is ten times slower).
const rspRace = true
