//go:build race

package tests

// raceEnabled: the server binary the tests build gets the race detector too.
const raceEnabled = true
