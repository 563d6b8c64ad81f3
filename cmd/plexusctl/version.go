package main

// Version is set at build time; the installer reports it in the node's
// PlexusNode.
var Version = "dev"
