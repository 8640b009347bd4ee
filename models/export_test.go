package models

// DeclaredErrors are the named errors, in their order of declaration.
func DeclaredErrors() []*Error { return declared }
