//go:build !linux

package main

import "syscall"

// Without parent-death signals and subreapers, the guard relies on its watch
// pipe alone, and a zombie in COMMAND's group lasts until init reaps it.

func guardAttr() *syscall.SysProcAttr   { return &syscall.SysProcAttr{Setpgid: true} }
func commandAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
func becomeSubreaper() error            { return nil }
