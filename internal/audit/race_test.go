//go:build race

package audit

// raceEnabled: under the race detector sync.Pool drops a share of what is put
// back, so zerolog's pooled events are allocated anew now and then.
const raceEnabled = true
