//go:build !race

package splice

const chatRace = false
