package fence_test

import (
	"database/sql"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/monolock/monolock/fence"
)

func TestSQLOrdersTokensAsUnsigned(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d fence.Dialect, db *sql.DB) {
		ctx := ctxFor(t)
		store := fence.Table{DB: db, Dialect: d}
		r := resourceName(t)
		highest := uint64(0)
		for i, s := range unsignedSteps {
			err := store.Admit(ctx, r, s.token)
			if s.ok && err != nil {
				t.Fatalf("step %d: Admit(%d) = %v, want admitted", i, s.token, err)
			}
			if !s.ok && !errors.Is(err, fence.ErrStale) {
				t.Fatalf("step %d: Admit(%d) = %v, want ErrStale", i, s.token, err)
			}
			if s.ok {
				highest = s.token
			}
			if got, want := stored(t, db, d, r), strconv.FormatUint(highest, 10); highest != 0 && got != want {
				t.Fatalf("step %d: stored token %s, want %s", i, got, want)
			}
		}
	})
}

func TestSQLStaleAdmitFailsTheTransaction(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d fence.Dialect, db *sql.DB) {
		ctx := ctxFor(t)
		r := resourceName(t)
		if err := (fence.Table{DB: db, Dialect: d}).Admit(ctx, r, 1<<63); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = fence.Admit(ctx, tx, d, r, math.MaxInt64)
		var se *fence.StaleError
		if !errors.As(err, &se) || se.Token != math.MaxInt64 || se.Resource != r {
			t.Fatalf("Admit(2^63-1 after 2^63) = %v, want a *StaleError for it", err)
		}
		if err := tx.Commit(); !errors.Is(err, sql.ErrTxDone) {
			t.Fatalf("Commit after a stale admit = %v, want sql.ErrTxDone (Admit rolled back)", err)
		}
	})
}

func TestSQLRolledBackAdmitLeavesTheFence(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d fence.Dialect, db *sql.DB) {
		ctx := ctxFor(t)
		r := resourceName(t)
		store := fence.Table{DB: db, Dialect: d}
		if err := store.Admit(ctx, r, 10); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := fence.Admit(ctx, tx, d, r, math.MaxUint64); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got := stored(t, db, d, r); got != "10" {
			t.Fatalf("after a rolled-back admit the fence holds %s, want 10", got)
		}
		if err := store.Admit(ctx, r, 11); err != nil {
			t.Fatalf("Admit(11) after the rollback: %v", err)
		}
	})
}

func TestSQLZeroIsNeverAdmitted(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d fence.Dialect, db *sql.DB) {
		r := resourceName(t)
		if err := (fence.Table{DB: db, Dialect: d}).Admit(ctxFor(t), r, 0); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("Admit(0) = %v, want ErrStale", err)
		}
		if got := stored(t, db, d, r); got != "" {
			t.Fatalf("token 0 left a row holding %s", got)
		}
	})
}

func TestSQLMissingTableSaysWhatToRun(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			ctx := ctxFor(t)
			db := openEmpty(t, d, "monolock_no_fence")
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = fence.Admit(ctx, tx, d, "r", 1)
			if !errors.Is(err, fence.ErrNoTable) || !strings.Contains(err.Error(), `fence.Schema("`+string(d)+`")`) {
				t.Fatalf("Admit without the table = %v, want ErrNoTable naming fence.Schema(%q)", err, d)
			}
			if err := tx.Commit(); !errors.Is(err, sql.ErrTxDone) {
				t.Fatalf("Commit after a failed admit = %v, want sql.ErrTxDone", err)
			}
		})
	}
}
