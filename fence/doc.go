// Package fence checks monolock fencing tokens where the guarded work lands.
//
// A lock holder may be paused, partitioned or force-released and still run;
// the server has handed the lock on, but the old holder does not know yet.
// Its writes are made harmless by the resource itself: every write carries
// the holder's token, and the resource admits a token only when it is greater
// than or equal to the largest it has admitted for that resource. Equal is
// admitted because one holder writes many times under one token.
//
// Tokens are unsigned 64-bit integers and pass 2^63 on 2038-01-19: every
// store compares them as unsigned. Token 0 is never issued by a server and
// is never admitted.
//
// A Fence is the rule behind one interface, so that a store in memory, in a
// database or behind an HTTP service is checked the same way: Memory keeps
// it in process memory, Table in a database's fence table, and package
// fencehttp puts it at the door of an HTTP service.
//
// A write to a SQL database fences best inside its own transaction: Schema
// is the fence table's DDL and Admit runs the one admit statement in the
// caller's *sql.Tx (database/sql only; bring your driver), rolling the
// transaction back when it does not admit. Where that statement's round
// trip costs too much, the admit rides in the write's own statement:
// AdmitFunction creates the admit function, AdmitCall is its call for the
// write's WHERE, and ExecAdmitted runs the write. docs/fencing.md is the
// contract every monolock client implements, per dialect and isolation level.
package fence
