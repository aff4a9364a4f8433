// Package records reads and writes spool records for the fastmq command:
// Append turns input lines into records (spool append, publish), Print
// writes them out (spool read), and Encoder is the one JSON record shape
// every --json that prints records uses (spool read, consume).
package records
