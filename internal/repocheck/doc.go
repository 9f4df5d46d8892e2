// Package repocheck holds the checks on the repository itself rather than on
// any one package: nothing large is committed, and nothing `go build` leaves
// behind can be committed by accident. Its tests run in `make test` and need
// a git checkout; outside one (a source archive) they skip and say so.
package repocheck
