//go:build tools

// Package tools holds no code. Its one import keeps lockguard's module, and
// so its requirements, in this module's build list (go mod tidy would drop
// a requirement nothing imports): the tools built from here then compile
// the packages they share with lockguard at lockguard's versions.
package tools

import _ "github.com/navique/lockguard/api/v1alpha1"
