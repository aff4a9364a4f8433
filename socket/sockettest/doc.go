// Package sockettest helps test code built on package socket: it runs a
// test once per transport (tcp, ipc, inproc) and hands out endpoints to
// bind.
package sockettest
