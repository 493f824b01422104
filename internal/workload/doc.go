// Package workload generates the inputs that tests and benchmarks share,
// so that a test's figure and the harness's figure measure the same thing.
package workload
