package fence

import (
	"context"
	"database/sql"
	"fmt"
)

// Table is a Fence whose store is the fence table of a database: each Admit
// runs in a short transaction of its own. It serves resources that check a
// token before they act (an HTTP service, a harness) rather than within
// their own write; a write to the same database fences best with Admit inside
// the write's transaction.
type Table struct {
	DB      *sql.DB
	Dialect Dialect
}

// Admit implements Fence.
func (t Table) Admit(ctx context.Context, resource string, token uint64) error {
	tx, err := t.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fence: begin the admit of token %d for %q: %w", token, resource, err)
	}
	if err := Admit(ctx, tx, t.Dialect, resource, token); err != nil {
		return err // Admit rolled tx back
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fence: commit the admit of token %d for %q: %w", token, resource, err)
	}
	return nil
}
