//go:build !race

package splice

const rspRace = false
