// Package gocronlock runs gocron (github.com/go-co-op/gocron/v2) jobs once
// per fleet with monolock: a gocron.Locker, under which each scheduled run of
// a job runs on one scheduler of the fleet, and a gocron.Elector, under which
// only the scheduler holding one named lock (the leader) runs jobs at all.
//
// # Locker: one lock per scheduled run
//
// gocron asks the Locker for a lock named after the job at every tick of
// every scheduler, and leaves the time splay between schedulers to it: a
// scheduler whose clock or timer runs a little late asks after another has
// run the tick and called Unlock. A lock released at Unlock would then be
// free, and the tick would run twice. NewLocker's locker therefore takes one
// lock per scheduled run, named after the job and the run's slot (the time
// the run was due, truncated to WithSlot, one second by default),
//
//	gocron/<job>@2026-12-06T22:00:01Z
//
// and keeps it after Unlock until two slots after the run's slot began. A
// scheduler late by less than one slot (clock skew plus timer delay) finds
// that run's lock held and skips the tick; the next run's lock has another
// name, so the hold never delays it. The lock is taken without waiting
// (client.Client.TryAcquire): a scheduler that finds it held skips the run,
// and gocron reports the error (wrapping ErrRunTaken) to the job's
// AfterLockError listener.
//
// The slot must be the resolution of the job's schedule: runs of one job at
// least one slot apart (one second fits every cron schedule, with seconds or
// without; a DurationJob of 500ms needs 500ms).
//
// # Elector: one leader
//
// NewElector's elector campaigns for one named lock for as long as it lives:
// it waits in the lock's FIFO queue, is leader while it holds the lock, and
// stops being leader the moment the lock is lost (client.Lock.Valid turns
// false, by the clock, even before the client has noticed), then queues
// again at the back. gocron asks IsLeader before every run; a scheduler
// that is not leader skips the run. A leader that dies is followed at once
// (the server hands the lock to the next in the queue when the connection
// closes); one that freezes, after its lease (WithLease).
//
// # Fencing
//
// A scheduler may pause after its check and run anyway; the guarded
// resource stays safe only if each write carries the run's fencing token.
// A job takes it from Held (Locker) or Elector.Held, whose Hold has the
// token and Valid, to check right before each side effect. Tokens come from
// one increasing sequence for every lock of the server, so the token of a
// later run (a new lock name) is larger than that of an earlier one: fence
// on the job's name as the resource (package fence).
package gocronlock
