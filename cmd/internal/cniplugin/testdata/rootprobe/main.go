// Command rootprobe is a delegate for hostroot_test.go: it prints the
// first line of /marker and its working directory, as it sees them.
package main

import (
	"fmt"
	"os"
)

func main() {
	b, err := os.ReadFile("/marker")
	if err != nil {
		fmt.Println("no marker:", err)
		os.Exit(1)
	}
	wd, _ := os.Getwd()
	fmt.Printf("%s %s", b, wd)
}
