// Package doccheck holds a test that every relative link in the project's
// Markdown (README.md, CHANGELOG.md, docs/, e2e/README.md and the chart's
// README.md) resolves: the file exists in the repository and, for a link
// to a heading (#anchor), the heading does too, by GitHub's spelling of
// heading anchors. It has no code outside its test; `go test ./...` runs it.
package doccheck
