// Package checks holds no code: its tests check the deployment artefacts
// under deployments/ (Dockerfiles, compose, Kubernetes, monitoring) against
// the real parsers and loaders those artefacts are fed to, and against a
// real crawl scraped by a real Prometheus; and the rules that span the
// workspace's modules, such as the imports of the pure packages
// (imports_test.go).
package checks
