// Package spooltest helps test code built on package spool: checks of a
// Log's behaviour that tests of the spool and of the packages that
// configure one (a node's streams) share.
package spooltest
