// Package doclinks checks the Markdown documentation of the repository (README.md and docs/*.md):
// every relative link points at a file that exists and, when it names an anchor, at a heading
// of that file as GitHub renders its anchor. Its test runs in make test.
package doclinks
