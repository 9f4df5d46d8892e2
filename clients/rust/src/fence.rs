//! Fencing tokens checked where the work lands, in PostgreSQL: the fence
//! table and the admit statement of docs/fencing.md, byte for byte as every
//! monolock client sends them (`fence/testdata/sql.txt` of the repository;
//! `tests/fence_vectors.rs` checks these constants against it).
//!
//! Run [`admit`] (tokio-postgres) or [`admit_blocking`] (postgres) inside the
//! transaction that does the guarded write, before the write. It admits the
//! token when it is greater than or equal to the largest admitted for the
//! resource, compared as unsigned 64-bit (the column is `numeric(20,0)`, the
//! token crosses the driver as decimal text), and the row lock it takes makes
//! a newer holder's admit wait until this transaction has ended. When it does
//! not admit, it rolls the transaction back (it takes the transaction by
//! value and hands it back only when admitted), so nothing the transaction
//! did lands.
//!
//! ```no_run
//! # async fn example(mut db: tokio_postgres::Client, token: u64) -> Result<(), Box<dyn std::error::Error>> {
//! db.batch_execute(monolock::fence::SCHEMA_POSTGRES).await?; // once; safe to run again
//! let tx = db.transaction().await?;
//! let tx = monolock::fence::admit(tx, "nightly-import", token).await?; // the lock's token; rolled back if stale
//! tx.execute("UPDATE reports SET body = $1 WHERE id = $2", &[&"done", &7_i64]).await?;
//! tx.commit().await?;
//! # Ok(())
//! # }
//! ```

use std::fmt;

use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

/// The fence table [`SCHEMA_POSTGRES`] creates and the admit statement writes.
pub const TABLE_NAME: &str = "monolock_fence";

/// Creates the fence table: one row per guarded resource, the largest token
/// admitted in a column that holds the whole unsigned 64-bit range in order.
/// One statement, safe to run again.
pub const SCHEMA_POSTGRES: &str = "CREATE TABLE IF NOT EXISTS monolock_fence (
    resource text PRIMARY KEY,
    token    numeric(20,0) NOT NULL CHECK (token BETWEEN 1 AND 18446744073709551615)
)";

/// The admit statement, for code that runs it without this module. Its
/// parameters are the resource and the token as decimal text (declare both
/// `text`); it returns one row when the token is admitted and none when it
/// is stale. `ON CONFLICT DO UPDATE` locks the row even when its `WHERE` is
/// false, so a refused admit also holds the row until its transaction ends.
pub const ADMIT_POSTGRES: &str =
    "INSERT INTO monolock_fence AS f (resource, token) VALUES ($1, $2::numeric(20,0))
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token
RETURNING 1";

/// Why an admit did not admit. The transaction has been rolled back in
/// every case.
#[non_exhaustive]
#[derive(Debug)]
pub enum FenceError {
    /// A larger token was admitted for the resource: the lock was handed on,
    /// and this holder's write must not land. Token 0, which no server
    /// issues, is refused the same way.
    Stale {
        /// The resource (the lock's name).
        resource: String,
        /// The token that was refused.
        token: u64,
    },
    /// The fence table does not exist: create it with [`SCHEMA_POSTGRES`].
    NoTable(tokio_postgres::Error),
    /// The database failed the statement (a lost connection, a serialization
    /// failure under REPEATABLE READ or SERIALIZABLE: retry the transaction).
    Database(tokio_postgres::Error),
}

impl fmt::Display for FenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FenceError::Stale { resource, token: 0 } => write!(
                f,
                "fence: token 0 for {resource:?} is never issued by a monolock server: pass the token of the lock you hold"
            ),
            FenceError::Stale { resource, token } => write!(
                f,
                "fence: stale token {token} for {resource:?}: a larger token was admitted, so the lock was handed on; stop the work and take the lock again"
            ),
            FenceError::NoTable(e) => write!(
                f,
                "fence: the fence table {TABLE_NAME} does not exist: create it with monolock::fence::SCHEMA_POSTGRES ({e})"
            ),
            FenceError::Database(e) => write!(f, "fence: admit: {e}"),
        }
    }
}

impl std::error::Error for FenceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FenceError::NoTable(e) | FenceError::Database(e) => Some(e),
            FenceError::Stale { .. } => None,
        }
    }
}

impl FenceError {
    /// Whether the token was refused (the lock was handed on).
    pub fn is_stale(&self) -> bool {
        matches!(self, FenceError::Stale { .. })
    }

    fn from_db(e: tokio_postgres::Error) -> FenceError {
        if e.code() == Some(&SqlState::UNDEFINED_TABLE) {
            FenceError::NoTable(e)
        } else {
            FenceError::Database(e)
        }
    }
}

/// The outcome of the statement: admitted, or why not.
fn outcome(
    resource: &str,
    token: u64,
    result: Result<Option<tokio_postgres::Row>, tokio_postgres::Error>,
) -> Result<(), FenceError> {
    match result {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(FenceError::Stale {
            resource: resource.to_string(),
            token,
        }),
        Err(e) => Err(FenceError::from_db(e)),
    }
}

/// Admits `token` for `resource` inside `tx` (tokio-postgres): one
/// statement, one round trip. Returns the transaction when admitted; rolls
/// it back and returns why when not.
pub async fn admit<'a>(
    tx: tokio_postgres::Transaction<'a>,
    resource: &str,
    token: u64,
) -> Result<tokio_postgres::Transaction<'a>, FenceError> {
    let result = if token == 0 {
        Ok(None)
    } else {
        let text = token.to_string();
        tx.query_typed_opt(
            ADMIT_POSTGRES,
            &[(&resource, Type::TEXT), (&text, Type::TEXT)],
        )
        .await
    };
    match outcome(resource, token, result) {
        Ok(()) => Ok(tx),
        Err(e) => {
            let _ = tx.rollback().await; // the error says why; a failed rollback changes nothing
            Err(e)
        }
    }
}

/// [`admit`] for the blocking `postgres` crate.
pub fn admit_blocking<'a>(
    mut tx: postgres::Transaction<'a>,
    resource: &str,
    token: u64,
) -> Result<postgres::Transaction<'a>, FenceError> {
    let result = if token == 0 {
        Ok(None)
    } else {
        let text = token.to_string();
        tx.query_typed_opt(
            ADMIT_POSTGRES,
            &[(&resource, Type::TEXT), (&text, Type::TEXT)],
        )
    };
    match outcome(resource, token, result) {
        Ok(()) => Ok(tx),
        Err(e) => {
            let _ = tx.rollback();
            Err(e)
        }
    }
}
