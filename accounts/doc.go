// Package accounts keeps the shop's users and who they are: sign-up and
// passwords, bearer tokens and their cache, browser sessions, the throttles
// on guessing, and roles.
package accounts
