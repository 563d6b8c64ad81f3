//go:build race

package cniplugin

// raceDetector: the race detector slows the lifecycles down about 3x.
const raceDetector = true
