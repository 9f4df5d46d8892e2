package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/monolock/monolock/fence"
)

// TestSQLRaceOrdersHolders runs two holders' transactions for one resource
// at once: the first admits its token and holds the row; the second's admit
// is seen blocked on the row lock (from the server's own view of its
// sessions); then the first commits. Whatever the order, the lower token
// never commits after the higher:
//   - older first: the newer waits, then is admitted (both commit, in token
//     order), except on PostgreSQL at REPEATABLE READ, where the waiter
//     fails with a serialization failure and must retry its transaction;
//   - newer first: the older waits, then is refused (stale; or, on
//     PostgreSQL at REPEATABLE READ, a serialization failure).
//
// Both forms are raced: fence.Admit before the write, and the write whose
// own statement admits (fence.ExecAdmitted).
func TestSQLRaceOrdersHolders(t *testing.T) {
	for _, form := range admitForms {
		t.Run(form.name, func(t *testing.T) { raceHolders(t, form) })
	}
}

func raceHolders(t *testing.T, form admitForm) {
	const older, newer = 1<<63 - 1, 1 << 63
	for _, d := range dialects {
		for _, level := range isolationLevels(d) {
			for _, newerFirst := range []bool{false, true} {
				order := "older-first"
				if newerFirst {
					order = "newer-first"
				}
				t.Run(string(d)+"/"+levelName(level)+"/"+order, func(t *testing.T) {
					db := openDB(t, d)
					form.setUp(t, db, d)
					ctx := ctxFor(t)
					r := resourceName(t)
					if err := (fence.Table{DB: db, Dialect: d}).Admit(ctx, r, 1); err != nil {
						t.Fatal(err)
					}
					first, second := uint64(older), uint64(newer)
					if newerFirst {
						first, second = second, first
					}
					opts := &sql.TxOptions{Isolation: level}
					tx1, err := db.BeginTx(ctx, opts)
					if err != nil {
						t.Fatal(err)
					}
					if err := form.admit(ctx, tx1, d, r, first); err != nil {
						t.Fatalf("first admit: %v", err)
					}

					conn, err := db.Conn(ctx)
					if err != nil {
						t.Fatal(err)
					}
					defer conn.Close()
					session := sessionID(t, ctx, conn, d)
					tx2, err := conn.BeginTx(ctx, opts)
					if err != nil {
						t.Fatal(err)
					}
					done := make(chan error, 1)
					go func() { done <- form.admit(ctx, tx2, d, r, second) }()
					awaitLockWait(t, ctx, db, d, session, done)

					if err := tx1.Commit(); err != nil {
						t.Fatalf("first commit: %v", err)
					}
					err = <-done
					switch {
					case d == fence.PostgreSQL && level == sql.LevelRepeatableRead:
						if err == nil || errors.Is(err, fence.ErrStale) {
							t.Fatalf("second admit at REPEATABLE READ = %v, want a serialization failure", err)
						}
					case newerFirst:
						if !errors.Is(err, fence.ErrStale) {
							t.Fatalf("older admit after the newer committed = %v, want ErrStale", err)
						}
					default:
						if err != nil {
							t.Fatalf("newer admit after the older committed = %v, want admitted", err)
						}
						if err := tx2.Commit(); err != nil {
							t.Fatal(err)
						}
					}
					if err != nil {
						if cerr := tx2.Commit(); !errors.Is(cerr, sql.ErrTxDone) {
							t.Fatalf("the refused transaction's Commit = %v, want sql.ErrTxDone", cerr)
						}
					}
					want := "9223372036854775808"
					if !newerFirst && err != nil {
						want = "9223372036854775807"
					}
					if got := stored(t, db, d, r); got != want {
						t.Fatalf("stored token %s, want %s", got, want)
					}
				})
			}
		}
	}
}

// sessionID is the server's id of conn's session.
func sessionID(t *testing.T, ctx context.Context, conn *sql.Conn, d fence.Dialect) int64 {
	t.Helper()
	q := "SELECT pg_backend_pid()"
	if d == fence.MySQL {
		q = "SELECT CONNECTION_ID()"
	}
	var id int64
	if err := conn.QueryRowContext(ctx, q).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// awaitLockWait returns once the server reports session waiting for a lock.
// The servers offer no notification, so it asks them again, until ctx ends;
// an admit that ends first (it should have blocked) fails the test.
// PostgreSQL answers from its live state, so every millisecond; InnoDB
// refreshes INNODB_TRX only when it was last read 0.1 s ago or more (asking
// faster keeps its cache stale for ever), so every 0.2 s.
func awaitLockWait(t *testing.T, ctx context.Context, db *sql.DB, d fence.Dialect, session int64, done <-chan error) {
	t.Helper()
	q := "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'"
	every := time.Millisecond
	if d == fence.MySQL {
		q = "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'"
		every = 200 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		var n int
		if err := db.QueryRowContext(ctx, q, session).Scan(&n); err != nil {
			t.Fatalf("ask whether session %d waits for a lock: %v", session, err)
		}
		if n > 0 {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the second admit returned %v without waiting for the first transaction's row lock", err)
		case <-ctx.Done():
			t.Fatalf("session %d never waited for the row lock: %v", session, ctx.Err())
		case <-tick.C:
		}
	}
}
