package fence_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/monolock/monolock/fence"
)

// The row-level and trigger variants of docs/fencing.md, statement for
// statement: keep the two in step.

var rowLevel = map[fence.Dialect]struct{ create, write string }{
	fence.PostgreSQL: {
		create: `CREATE TABLE IF NOT EXISTS accounts (
    id      text PRIMARY KEY,
    balance bigint NOT NULL,
    fence   numeric(20,0) NOT NULL DEFAULT 0
)`,
		write: `UPDATE accounts SET balance = $1, fence = $2::numeric(20,0)
WHERE id = $3 AND fence <= $2::numeric(20,0)`,
	},
	fence.MySQL: {
		create: `CREATE TABLE IF NOT EXISTS accounts (
    id      VARCHAR(64) NOT NULL PRIMARY KEY,
    balance BIGINT NOT NULL,
    fence   BIGINT UNSIGNED NOT NULL DEFAULT 0
) ENGINE=InnoDB`,
		write: `UPDATE accounts SET balance = ?, fence = CAST(? AS UNSIGNED)
WHERE id = ? AND fence <= CAST(? AS UNSIGNED)`,
	},
}

// rowLevelWrite runs the row-level write and says whether it landed.
func rowLevelWrite(t *testing.T, db *sql.DB, d fence.Dialect, id string, balance int64, token string) bool {
	t.Helper()
	args := []any{balance, token, id}
	if d == fence.MySQL {
		args = append(args, token)
	}
	res, err := db.Exec(rowLevel[d].write, args...)
	if err != nil {
		t.Fatal(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestSQLRowLevelVariant(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			// On MySQL the client flag clientFoundRows makes an UPDATE count
			// the rows it matched, not only those it changed: without it, a
			// holder's second write of the same values reads as refused.
			db := openRaw(t, d, "", "clientFoundRows=true")
			if _, err := db.Exec(rowLevel[d].create); err != nil {
				t.Fatal(err)
			}
			id := resourceName(t)
			insert := "INSERT INTO accounts (id, balance) VALUES ($1, 0)"
			if d == fence.MySQL {
				insert = "INSERT INTO accounts (id, balance) VALUES (?, 0)"
			}
			if _, err := db.Exec(insert, id); err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				token string
				lands bool
			}{
				{"9223372036854775807", true},  // 2^63 − 1
				{"9223372036854775807", true},  // again, same balance: still found
				{"9223372036854775808", true},  // 2^63
				{"9223372036854775807", false}, // stale
				{"18446744073709551615", true}, // 2^64 − 1
				{"9223372036854775808", false}, // stale
				{"18446744073709551615", true}, // equal
			}
			for i, s := range steps {
				if got := rowLevelWrite(t, db, d, id, 7, s.token); got != s.lands {
					t.Fatalf("step %d: write with token %s landed = %v, want %v", i, s.token, got, s.lands)
				}
			}
		})
	}
}

var trigger = map[fence.Dialect][]string{
	fence.PostgreSQL: {
		`CREATE TABLE IF NOT EXISTS ledger (
    id     text PRIMARY KEY,
    amount bigint NOT NULL,
    fence  numeric(20,0) NOT NULL DEFAULT 0
)`,
		`CREATE OR REPLACE FUNCTION monolock_refuse_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.fence < OLD.fence THEN
        RAISE EXCEPTION 'monolock fence: stale token % for %: token % was written', NEW.fence, TG_TABLE_NAME, OLD.fence
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$`,
		`CREATE OR REPLACE TRIGGER ledger_fence BEFORE UPDATE ON ledger
    FOR EACH ROW EXECUTE FUNCTION monolock_refuse_stale()`,
	},
	fence.MySQL: {
		`CREATE TABLE IF NOT EXISTS ledger (
    id     VARCHAR(64) NOT NULL PRIMARY KEY,
    amount BIGINT NOT NULL,
    fence  BIGINT UNSIGNED NOT NULL DEFAULT 0
) ENGINE=InnoDB`,
		`CREATE OR REPLACE TRIGGER ledger_fence BEFORE UPDATE ON ledger FOR EACH ROW
IF NEW.fence < OLD.fence THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'monolock fence: stale token for ledger';
END IF`,
	},
}

func TestSQLTriggerVariant(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			db := openRaw(t, d, "")
			for _, stmt := range trigger[d] {
				if _, err := db.Exec(stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			ph := func(q string) string {
				if d == fence.MySQL {
					q = strings.NewReplacer("$1", "?", "$2", "?", "::numeric(20,0)", "").Replace(q)
				}
				return q
			}
			id := resourceName(t)
			if _, err := db.Exec(ph("INSERT INTO ledger (id, amount) VALUES ($1, 0)"), id); err != nil {
				t.Fatal(err)
			}
			fenced := ph("UPDATE ledger SET amount = amount + 1, fence = $1::numeric(20,0) WHERE id = $2")
			if _, err := db.Exec(fenced, "9223372036854775808", id); err != nil {
				t.Fatalf("write with 2^63: %v", err)
			}
			// Other code that knows nothing of tokens leaves the fence as is.
			if _, err := db.Exec(ph("UPDATE ledger SET amount = amount + 1 WHERE id = $1"), id); err != nil {
				t.Fatalf("a write without a token: %v", err)
			}
			tx, err := db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			_, err = tx.Exec(fenced, "9223372036854775807", id)
			if err == nil || !strings.Contains(err.Error(), "monolock fence: stale token") {
				t.Fatalf("write with 2^63 − 1 after 2^63 = %v, want the trigger's refusal", err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			var amount int64
			if err := db.QueryRow(ph("SELECT amount FROM ledger WHERE id = $1"), id).Scan(&amount); err != nil {
				t.Fatal(err)
			}
			if amount != 2 {
				t.Fatalf("amount %d, want 2 (the stale write must not land)", amount)
			}
			if _, err := db.Exec(fenced, "18446744073709551615", id); err != nil {
				t.Fatalf("write with 2^64 − 1: %v", err)
			}
		})
	}
}
