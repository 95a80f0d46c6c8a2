//go:build race

package readmodel

// raceDetector is true in a build with the race detector, whose sync.Pool
// drops a quarter of what it is given (to bring out code that relies on
// reuse): a lookup through the pooled slices may then allocate.
const raceDetector = true
