package multihost_test

// sysSetns is setns(2) on linux/arm64 (the syscall package has no name
// for it).
const sysSetns = 268
