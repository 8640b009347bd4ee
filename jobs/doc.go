// Package jobs runs the shop's background work beside the HTTP server: the
// minute's sweep, the payment reconciler, the outbox's relay and the
// webhook sender, each on the services main hands it.
package jobs
