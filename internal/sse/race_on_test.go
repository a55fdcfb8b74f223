//go:build race

package sse

const raceEnabled = true
