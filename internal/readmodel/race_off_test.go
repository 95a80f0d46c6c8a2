//go:build !race

package readmodel

// raceDetector is true in a build with the race detector (race_on_test.go).
const raceDetector = false
