//go:build !race

package dx_test

const raceSlowdown = 1
