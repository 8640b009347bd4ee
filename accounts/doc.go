// Package accounts keeps who may use the shop: users and their passwords,
// bearer tokens and browser sessions, roles, and the throttles on log-ins.
package accounts
