//go:build !linux

package persistence

import "syscall"

// setUserTimeout does nothing here: TCP_USER_TIMEOUT is Linux's. The
// keepalives still notice a dead peer on an idle connection.
func setUserTimeout(string, string, syscall.RawConn) error { return nil }
