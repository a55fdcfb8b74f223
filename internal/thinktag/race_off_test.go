//go:build !race

package thinktag

const raceEnabled = false
