//go:build !race

package cniplugin

const raceDetector = false
