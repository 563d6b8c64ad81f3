// Package layout holds the test of plexus's layering: which of its packages
// may import which, and what a binary may link. It has no code of its own.
package layout
