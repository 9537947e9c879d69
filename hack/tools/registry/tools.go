//go:build tools

// Package tools pins the registry tools the tests run: crane (a registry and a client) and
// the distribution registry (for basic auth).
package tools

import (
	_ "github.com/distribution/distribution/v3/cmd/registry"
	_ "github.com/google/go-containerregistry/cmd/crane"
)
