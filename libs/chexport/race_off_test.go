//go:build !race

package chexport_test

// raceEnabled: the race detector slows scanning and encoding tenfold.
const raceEnabled = false
