//go:build !race

package splice

const messagesRace = false
