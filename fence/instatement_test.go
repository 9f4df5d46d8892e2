package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/monolock/monolock/fence"
)

// The in-statement admit: the guarded write is one INSERT whose WHERE calls
// the admit function, so the admit and the write land together or not at all.

// writesTable is what the in-statement tests write to.
var writesTable = map[fence.Dialect]struct{ create, insert, unfenced string }{
	fence.PostgreSQL: {
		create:   `CREATE TABLE IF NOT EXISTS fence_test_writes (resource text NOT NULL, v bigint NOT NULL)`,
		insert:   `INSERT INTO fence_test_writes (resource, v) SELECT $1, $2 WHERE ` + fence.AdmitCall(fence.PostgreSQL, 3),
		unfenced: `INSERT INTO fence_test_writes (resource, v) VALUES ($1, $2)`,
	},
	fence.MySQL: {
		create:   `CREATE TABLE IF NOT EXISTS fence_test_writes (resource VARCHAR(255) NOT NULL, v BIGINT NOT NULL) ENGINE=InnoDB`,
		insert:   `INSERT INTO fence_test_writes (resource, v) SELECT ?, ? FROM DUAL WHERE ` + fence.AdmitCall(fence.MySQL, 3),
		unfenced: `INSERT INTO fence_test_writes (resource, v) VALUES (?, ?)`,
	},
}

// setUpInStatement creates the admit function and the table written to.
func setUpInStatement(t *testing.T, db *sql.DB, d fence.Dialect) {
	t.Helper()
	for _, q := range append(fence.AdmitFunction(d), writesTable[d].create) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// writeAdmitted is one guarded write by the in-statement admit: the write
// lands with the admit in one statement.
func writeAdmitted(ctx context.Context, tx *sql.Tx, d fence.Dialect, resource string, token uint64) error {
	res, err := fence.ExecAdmitted(ctx, tx, d, resource, token, writesTable[d].insert, resource, 1)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		_ = tx.Rollback()
		return errors.Join(errors.New("the admitted INSERT … SELECT wrote no row"), err)
	}
	return nil
}

// admitForm is one way to fence a write inside a transaction.
type admitForm struct {
	name  string
	setUp func(t *testing.T, db *sql.DB, d fence.Dialect)
	admit func(ctx context.Context, tx *sql.Tx, d fence.Dialect, resource string, token uint64) error
}

var admitForms = []admitForm{
	{"Admit", func(*testing.T, *sql.DB, fence.Dialect) {}, fence.Admit},
	{"ExecAdmitted", setUpInStatement, writeAdmitted},
}

// written counts the in-statement writes that landed for resource.
func written(t *testing.T, db *sql.DB, d fence.Dialect, resource string) int {
	t.Helper()
	q := "SELECT count(*) FROM fence_test_writes WHERE resource = $1"
	if d == fence.MySQL {
		q = "SELECT COUNT(*) FROM fence_test_writes WHERE resource = ?"
	}
	var n int
	if err := db.QueryRow(q, resource).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// inTx runs one in-statement write in a transaction of its own and commits
// it when admitted.
func inTx(ctx context.Context, db *sql.DB, d fence.Dialect, resource string, token uint64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := writeAdmitted(ctx, tx, d, resource, token); err != nil {
		return err
	}
	return tx.Commit()
}

func TestInStatementOrdersTokensAsUnsigned(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d fence.Dialect, db *sql.DB) {
		setUpInStatement(t, db, d)
		ctx := ctxFor(t)
		r := resourceName(t)
		highest, landed := uint64(0), 0
		for i, s := range unsignedSteps {
			err := inTx(ctx, db, d, r, s.token)
			var se *fence.StaleError
			switch {
			case s.ok && err != nil:
				t.Fatalf("step %d: write with token %d = %v, want admitted", i, s.token, err)
			case !s.ok && (!errors.As(err, &se) || se.Token != s.token || se.Resource != r):
				t.Fatalf("step %d: write with token %d = %v, want a *StaleError for it", i, s.token, err)
			case !s.ok && s.token != 0 && se.Highest != highest:
				t.Fatalf("step %d: the refusal names token %d as admitted, want %d", i, se.Highest, highest)
			}
			if s.ok {
				highest, landed = s.token, landed+1
			}
			if got, want := stored(t, db, d, r), strconv.FormatUint(highest, 10); highest != 0 && got != want {
				t.Fatalf("step %d: stored token %s, want %s", i, got, want)
			}
			if n := written(t, db, d, r); n != landed {
				t.Fatalf("step %d: %d writes landed, want %d", i, n, landed)
			}
		}
	})
}

func TestInStatementStaleWriteFailsTheTransaction(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d fence.Dialect, db *sql.DB) {
		setUpInStatement(t, db, d)
		ctx := ctxFor(t)
		r := resourceName(t)
		if err := inTx(ctx, db, d, r, 1<<63); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		// An earlier write in the same transaction must not land either.
		if _, err := tx.ExecContext(ctx, writesTable[d].unfenced, r, 2); err != nil {
			t.Fatal(err)
		}
		err = writeAdmitted(ctx, tx, d, r, math.MaxInt64)
		if !errors.Is(err, fence.ErrStale) {
			t.Fatalf("write with 2^63-1 after 2^63 = %v, want ErrStale", err)
		}
		if err := tx.Commit(); !errors.Is(err, sql.ErrTxDone) {
			t.Fatalf("Commit after a stale write = %v, want sql.ErrTxDone (ExecAdmitted rolled back)", err)
		}
		if n := written(t, db, d, r); n != 1 {
			t.Fatalf("%d writes landed, want the first holder's 1", n)
		}
	})
}

func TestInStatementRolledBackWriteLeavesTheFence(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d fence.Dialect, db *sql.DB) {
		setUpInStatement(t, db, d)
		ctx := ctxFor(t)
		r := resourceName(t)
		if err := inTx(ctx, db, d, r, 10); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeAdmitted(ctx, tx, d, r, math.MaxUint64); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got := stored(t, db, d, r); got != "10" {
			t.Fatalf("after a rolled-back write the fence holds %s, want 10", got)
		}
		if err := inTx(ctx, db, d, r, 11); err != nil {
			t.Fatalf("write with 11 after the rollback: %v", err)
		}
	})
}

// The function itself refuses token 0, for callers that do not go through
// ExecAdmitted (which refuses it before sending), and AdmitError reads its
// refusal.
func TestInStatementFunctionRefusesZero(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d fence.Dialect, db *sql.DB) {
		setUpInStatement(t, db, d)
		r := resourceName(t)
		q := "SELECT " + fence.AdmitCall(d, 1)
		var ok bool
		err := db.QueryRow(q, r, "0").Scan(&ok)
		if err := fence.AdmitError(d, err, r, 0); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("%s with token 0 = %v, want ErrStale", q, err)
		}
		if got := stored(t, db, d, r); got != "" {
			t.Fatalf("token 0 left a row holding %s", got)
		}
	})
}

// Resource names are case-sensitive on both dialects: two locks never
// share a fence row.
func TestInStatementResourcesAreCaseSensitive(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d fence.Dialect, db *sql.DB) {
		setUpInStatement(t, db, d)
		ctx := ctxFor(t)
		r := resourceName(t)
		if err := inTx(ctx, db, d, r+"-Import", 9); err != nil {
			t.Fatal(err)
		}
		if err := inTx(ctx, db, d, r+"-import", 3); err != nil {
			t.Fatalf("a lock whose name differs in case only is refused: %v", err)
		}
	})
}

// TestInStatementMissingSetUpSaysWhatToRun: without the admit function the
// error names fence.AdmitFunction; with it but without the fence table,
// fence.Schema.
func TestInStatementMissingSetUpSaysWhatToRun(t *testing.T) {
	for _, d := range dialects {
		for _, missing := range []string{"function", "table"} {
			t.Run(string(d)+"/"+missing, func(t *testing.T) {
				ctx := ctxFor(t)
				db := openEmpty(t, d, "monolock_no_fence_"+missing)
				setUp := []string{writesTable[d].create, fence.Schema(d)}
				want, advice := fence.ErrNoFunction, `fence.AdmitFunction("`+string(d)+`")`
				if missing == "table" {
					setUp = append([]string{writesTable[d].create}, fence.AdmitFunction(d)...)
					want, advice = fence.ErrNoTable, `fence.Schema("`+string(d)+`")`
				}
				for _, q := range setUp {
					if _, err := db.Exec(q); err != nil {
						t.Fatal(err)
					}
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				err = writeAdmitted(ctx, tx, d, "r", 1)
				if !errors.Is(err, want) || !strings.Contains(err.Error(), advice) {
					t.Fatalf("write without the %s = %v, want %v naming %s", missing, err, want, advice)
				}
				if err := tx.Commit(); !errors.Is(err, sql.ErrTxDone) {
					t.Fatalf("Commit after a failed write = %v, want sql.ErrTxDone", err)
				}
			})
		}
	}
}

// docs/fencing.md shows the admit function's statements for the clients
// that have no helper for it: they must be the ones AdmitFunction returns.
func TestDocsShowTheAdmitFunction(t *testing.T) {
	doc, err := os.ReadFile("../docs/fencing.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dialects {
		for _, q := range fence.AdmitFunction(d) {
			if !strings.Contains(string(doc), q) {
				t.Errorf("docs/fencing.md does not show the %s statement\n%s", d, q)
			}
		}
	}
}
