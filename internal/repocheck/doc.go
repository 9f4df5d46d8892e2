// Package repocheck holds the checks on the repository itself rather than on
// any one package: nothing large is committed, nothing `go build` leaves
// behind can be committed by accident, what CONTRIBUTING.md and the
// README's architecture walk-through cite exists, and the imports between
// the module's packages point the one way the README's architecture says,
// and no package but main keeps mutable state at package level. Its tests run in
// `make test` and need a git checkout; outside one (a source archive) they
// skip and say so.
package repocheck
