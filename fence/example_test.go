package fence_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/monolock/monolock/fence"
)

// The guarded write and the admit of its token share one transaction: when
// a newer holder's token has been admitted, Admit rolls the transaction back
// and the write never lands. (The database here is an in-memory stand-in
// for PostgreSQL; a service opens its own, e.g. sql.Open("pgx", dsn), and
// runs fence.Schema once.)
func ExampleAdmit() {
	ctx := context.Background()
	db, tables := openMemPostgres()
	defer db.Close()

	// writeReport is the guarded write of a lock holder whose fencing token
	// is token (client.Client.Do passes it to the function it runs).
	writeReport := func(token uint64, body string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fence.Admit(ctx, tx, fence.PostgreSQL, "reports", token); err != nil {
			return err // Admit has rolled tx back
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO reports (body) VALUES ($1)", body); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}

	fmt.Println(writeReport(41, "first holder"))
	fmt.Println(writeReport(41, "first holder, second write")) // the same token again
	fmt.Println(writeReport(42, "next holder"))
	// The first holder was paused past its lease and resumes:
	err := writeReport(41, "first holder after its pause")
	fmt.Println(errors.Is(err, fence.ErrStale))
	fmt.Println(err)
	fmt.Println(tables.Reports())
	// Output:
	// <nil>
	// <nil>
	// <nil>
	// true
	// fence: stale token 41 for "reports": a larger token was admitted, so the lock was handed on; stop the work and take the lock again
	// [first holder first holder, second write next holder]
}

// A refused admit wraps ErrStale, for errors.Is, and is a *StaleError, for
// errors.As when the caller wants the detail: the resource, the refused
// token and (where the store says) the largest admitted one.
func ExampleStaleError() {
	ctx := context.Background()
	var f fence.Fence = &fence.Memory{}
	_ = f.Admit(ctx, "payroll", 7)

	err := f.Admit(ctx, "payroll", 6)
	if errors.Is(err, fence.ErrStale) {
		fmt.Println("stale: stop the work, do not retry with the same token")
	}
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Println(stale.Resource, stale.Token, stale.Highest)
	}
	// Token 0 is never issued, so never admitted.
	fmt.Println(f.Admit(ctx, "payroll", 0))
	// Output:
	// stale: stop the work, do not retry with the same token
	// payroll 6 7
	// fence: token 0 for "payroll" is never issued by a monolock server: pass the token of the lock you hold
}
