// Package doccheck holds the tests that keep the repository's house in
// order; `go test ./...` runs them. Every relative link in the project's
// Markdown (README.md, CHANGELOG.md, docs/ and docs/history/, e2e/README.md
// and the chart's README.md) resolves: the file exists in the repository
// and, for a link to a heading (#anchor), the heading does too, by
// GitHub's spelling of heading anchors. And every file keeps to the
// house's size limits: a production Go file at most 400 lines, a test file
// 800, README.md 400, a docs/ file 600 (run logs go to docs/history/,
// which has none). And imports run one way (docs/development.md, Layout):
// no production file under internal/ imports webhook/, controller/ or
// cmd/, but those kept in importExceptions. It has no code outside its
// tests.
package doccheck
