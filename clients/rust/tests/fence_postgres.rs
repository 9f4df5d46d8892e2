//! The fence helper against a real PostgreSQL, named by
//! `MONOLOCK_TEST_POSTGRES` (`go run ./internal/testsupport/testdb/withdb --
//! make rust-test` starts a throwaway one). Without it they fail, unless
//! `MONOLOCK_TEST_SKIP_DATABASES=1` skips them on purpose.
#![cfg(all(feature = "fence-postgres", feature = "tokio"))]

use std::time::Duration;

use monolock::fence::{self, FenceError};
use tokio_postgres::NoTls;

/// The variable that skips these tests on purpose, for a machine without
/// PostgreSQL: without it a missing `MONOLOCK_TEST_POSTGRES` is a failure, so
/// that a run which meant to test the fence cannot pass without testing it.
const SKIP: &str = "MONOLOCK_TEST_SKIP_DATABASES";

fn database() -> Option<String> {
    match std::env::var("MONOLOCK_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os(SKIP).is_some_and(|v| v == "1") => {
            eprintln!("SKIP: {SKIP}=1: the fence tests against PostgreSQL are skipped on purpose");
            None
        }
        _ => panic!(
            "MONOLOCK_TEST_POSTGRES is not set: the fence tests need a PostgreSQL; \
             run them under internal/testsupport/testdb/withdb (make rust-test does), \
             or set {SKIP}=1 to skip them on purpose"
        ),
    }
}

/// Creates the fence table once for the whole test binary: PostgreSQL's
/// CREATE TABLE IF NOT EXISTS is not safe against itself run at the same
/// moment by the tests' parallel connections.
fn schema(url: &str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let url = url.to_string();
        // On a thread of its own: postgres::Client refuses to run inside a runtime.
        std::thread::spawn(move || {
            let mut db = postgres::Client::connect(&url, postgres::NoTls)
                .expect("connect to MONOLOCK_TEST_POSTGRES");
            db.batch_execute(fence::SCHEMA_POSTGRES).unwrap();
            db.batch_execute(fence::SCHEMA_POSTGRES)
                .expect("safe to run again");
            db.batch_execute(
                "CREATE TABLE IF NOT EXISTS rust_fence_writes (resource text, token text)",
            )
            .unwrap();
        })
        .join()
        .unwrap();
    });
}

async fn connect(url: &str) -> tokio_postgres::Client {
    schema(url);
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("connect to MONOLOCK_TEST_POSTGRES");
    tokio::spawn(conn);
    client
}

/// A resource no other test (or run) uses.
fn resource(tag: &str) -> String {
    format!("rust-{tag}-{}-{}", std::process::id(), fastrand::u64(..))
}

async fn stored(db: &tokio_postgres::Client, resource: &str) -> Option<String> {
    db.query_opt(
        "SELECT token::text FROM monolock_fence WHERE resource = $1",
        &[&resource],
    )
    .await
    .unwrap()
    .map(|r| r.get(0))
}

#[tokio::test(flavor = "current_thread")]
async fn tokens_are_admitted_in_unsigned_order_and_a_stale_one_rolls_back() {
    let Some(url) = database() else { return };
    let mut db = connect(&url).await;
    let r = resource("order");
    // Past 2^63 a signed comparison would order these wrong.
    for token in [
        (1u64 << 63) - 1,
        1 << 63,
        (1 << 63) + 1,
        (1 << 63) + 1,
        u64::MAX,
    ] {
        let tx = db.transaction().await.unwrap();
        let tx = fence::admit(tx, &r, token)
            .await
            .unwrap_or_else(|e| panic!("{token}: {e}"));
        tx.execute(
            "INSERT INTO rust_fence_writes VALUES ($1, $2)",
            &[&r, &token.to_string()],
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }
    assert_eq!(
        stored(&db, &r).await.as_deref(),
        Some("18446744073709551615")
    );
    for token in [1 << 63, 0] {
        let tx = db.transaction().await.unwrap();
        tx.execute("INSERT INTO rust_fence_writes VALUES ($1, 'stale')", &[&r])
            .await
            .unwrap();
        match fence::admit(tx, &r, token).await {
            Err(e @ FenceError::Stale { .. }) => {
                assert!(e.is_stale() && e.to_string().contains(&r), "{e}")
            }
            Err(e) => panic!("{token}: {e:?}"),
            Ok(_) => panic!("{token}: admitted"),
        }
    }
    let stale: i64 = db
        .query_one(
            "SELECT count(*) FROM rust_fence_writes WHERE resource = $1 AND token = 'stale'",
            &[&r],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stale, 0, "the stale transactions were rolled back");
}

#[tokio::test(flavor = "current_thread")]
async fn a_missing_table_says_what_to_run() {
    let Some(url) = database() else { return };
    let mut db = connect(&url).await;
    let schema = format!("rust_empty_{}", fastrand::u32(..));
    db.batch_execute(&format!(
        "CREATE SCHEMA {schema}; SET search_path TO {schema}"
    ))
    .await
    .unwrap();
    let tx = db.transaction().await.unwrap();
    let Err(err) = fence::admit(tx, "x", 7).await else {
        panic!("admitted without a table")
    };
    assert!(matches!(err, FenceError::NoTable(_)), "{err:?}");
    assert!(err.to_string().contains("SCHEMA_POSTGRES"), "{err}");
    db.batch_execute(&format!("SET search_path TO public; DROP SCHEMA {schema}"))
        .await
        .unwrap();
}

/// The newer holder admits first and holds the row; the older one's admit
/// waits for the row lock and, once the newer commits, is refused.
#[tokio::test(flavor = "current_thread")]
async fn an_older_holder_waits_for_the_newer_and_is_refused() {
    let Some(url) = database() else { return };
    let mut newer = connect(&url).await;
    let mut older = connect(&url).await;
    let watcher = connect(&url).await;
    let r = resource("race");
    let older_pid: i32 = older
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let tx = newer.transaction().await.unwrap();
    let held = fence::admit(tx, &r, 20).await.unwrap();
    let r2 = r.clone();
    let waiting = tokio::spawn(async move {
        let tx = older.transaction().await.unwrap();
        fence::admit(tx, &r2, 10).await.map(drop)
    });
    // Awaited as an event: the older admit shows up waiting for a lock.
    loop {
        let row = watcher
            .query_one(
                "SELECT coalesce(wait_event_type, '') FROM pg_stat_activity WHERE pid = $1",
                &[&older_pid],
            )
            .await
            .unwrap();
        if row.get::<_, String>(0) == "Lock" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!waiting.is_finished());
    held.commit().await.unwrap();
    let got = waiting.await.unwrap();
    assert!(
        matches!(got, Err(FenceError::Stale { token: 10, .. })),
        "{got:?}"
    );
    assert_eq!(stored(&watcher, &r).await.as_deref(), Some("20"));
}

#[test]
fn the_blocking_helper_admits_and_refuses() {
    let Some(url) = database() else { return };
    schema(&url);
    let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let r = resource("blocking");
    let tx = fence::admit_blocking(db.transaction().unwrap(), &r, u64::MAX).unwrap();
    tx.commit().unwrap();
    let Err(err) = fence::admit_blocking(db.transaction().unwrap(), &r, u64::MAX - 1) else {
        panic!("a smaller token was admitted")
    };
    assert!(err.is_stale(), "{err:?}");
    // The connection is usable again: the refused transaction was rolled back.
    let tx = fence::admit_blocking(db.transaction().unwrap(), &r, u64::MAX).unwrap();
    tx.rollback().unwrap();
}
