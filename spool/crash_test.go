package spool

const crashChildEnv = "FASTMQ_SPOOL_CRASH_CHILD"

func crashChild() {}
