//! The async client against a scripted fake server: what it writes, when
//! it closes, what it reports.
#![cfg(feature = "tokio")]

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use monolock::{Client, Error};
use support::*;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

const T: u64 = (1 << 63) + 1; // past 2^63: unsigned all the way
const LEASE: Duration = Duration::from_millis(400);

/// The fake server's next word.
async fn hear(rx: &mut UnboundedReceiver<&'static str>) -> &'static str {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("the fake server's word in time")
        .expect("the fake server's script ran")
}

#[tokio::test]
async fn heartbeats_are_answered_and_release_waits_for_the_servers_close() {
    let (tx, mut rx) = unbounded_channel();
    let fake = Fake::start(move |_, mut c| {
        assert_eq!(read_acquire(&mut c), (400, b"nightly-import".to_vec()));
        send(&mut c, &acquired(T));
        read_heartbeat(&mut c);
        send(&mut c, &acquired(T));
        // The second stays in flight: a close with an answer unread in the
        // client's socket would be a reset, not a FIN.
        read_heartbeat(&mut c);
        tx.send("two heartbeats").unwrap();
        release_and_close(&mut c);
        tx.send("closed").unwrap();
    });
    let lock = Client::new(&fake.addr)
        .lock("nightly-import", LEASE)
        .await
        .unwrap();
    assert_eq!(lock.token(), T);
    assert_eq!(lock.tls_resumed(), None);
    assert_eq!(hear(&mut rx).await, "two heartbeats");
    assert!(lock.lost_error().is_none());
    lock.release().await.unwrap();
    assert_eq!(hear(&mut rx).await, "closed");
}

#[tokio::test]
async fn a_queued_lock_is_granted_by_the_push() {
    let fake = Fake::start(|_, mut c| {
        read_acquire(&mut c);
        send(&mut c, &WAITING);
        send(&mut c, &acquired(T));
        answer_heartbeats(&mut c, T);
    });
    let lock = Client::new(&fake.addr)
        .lock("q", Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(lock.token(), T);
    assert!(lock.is_valid());
}

#[tokio::test]
async fn try_lock_on_a_held_lock_is_busy_and_leaves_the_queue() {
    let (tx, mut rx) = unbounded_channel();
    let fake = Fake::start(move |_, mut c| {
        read_acquire(&mut c);
        send(&mut c, &WAITING);
        release_and_close(&mut c);
        tx.send("left").unwrap();
    });
    let client = Client::new(&fake.addr);
    let got = client.try_lock("q", LEASE).await;
    assert!(matches!(got, Err(Error::Busy)), "{got:?}");
    assert_eq!(hear(&mut rx).await, "left");
}

#[tokio::test]
async fn lock_timeout_leaves_the_queue_when_the_wait_runs_out() {
    let (tx, mut rx) = unbounded_channel();
    let fake = Fake::start(move |_, mut c| {
        read_acquire(&mut c);
        send(&mut c, &WAITING);
        answer_waiting(&mut c);
        tx.send("left").unwrap();
    });
    let client = Client::new(&fake.addr);
    // The wait counts from the attempt's start, the connect included:
    // long enough for a loaded machine to be queued first (the heartbeats
    // are answered meanwhile), or the attempt fails by silence instead.
    let got = client
        .lock_timeout("q", LEASE, Duration::from_secs(1))
        .await;
    assert!(matches!(got, Err(Error::Busy)), "{got:?}");
    assert_eq!(hear(&mut rx).await, "left");
}

/// Answers heartbeats with WAITING until the client releases (then closes
/// first).
fn answer_waiting(c: &mut std::net::TcpStream) {
    use std::io::Read;
    let mut b = [0u8; 1];
    while let Ok(1) = c.read(&mut b) {
        if b[0] == 0x03 {
            return;
        }
        send(c, &WAITING);
    }
}

#[tokio::test]
async fn run_retries_server_conditions_and_returns_the_works_result() {
    let fake = Fake::start(|n, mut c| {
        read_acquire(&mut c);
        match n {
            0 => send(&mut c, &error(0x05, "busy elsewhere")),
            1 => send(&mut c, &error(0x01, "server shutting down")),
            _ => {
                send(&mut c, &acquired(T + n as u64));
                answer_heartbeats(&mut c, T + n as u64);
            }
        }
    });
    let client = Client::new(&fake.addr);
    let token = client
        .run(
            "r",
            LEASE,
            |lock| async move { Ok::<_, Error>(lock.token()) },
        )
        .await
        .unwrap();
    assert_eq!(token, T + 2, "granted on the third connection");
}

#[tokio::test]
async fn run_reports_client_errors_without_retrying() {
    let reason = "é".repeat(127) + "!"; // 255 bytes
    let sent = reason.clone();
    let fake = Fake::start(move |_, mut c| {
        read_acquire(&mut c);
        send(&mut c, &error(0x18, &sent));
    });
    let client = Client::new(&fake.addr);
    let got = client
        .run("r", LEASE, |_| async { Ok::<_, Error>(()) })
        .await;
    match got {
        Err(Error::Server {
            code: 0x18,
            reason: r,
        }) => assert_eq!(r, reason),
        other => panic!("{other:?}"),
    }
    assert_eq!(fake.accepted(PATIENCE), Some(0));
    // run has returned: no attempt can follow.
    assert_eq!(fake.accepted(Duration::ZERO), None);
}

#[tokio::test]
async fn run_cancels_the_work_at_the_loss() {
    let fake = Fake::start(|_, mut c| {
        read_acquire(&mut c);
        send(&mut c, &acquired(T));
        read_heartbeat(&mut c);
        send(&mut c, &error(0x02, "closed by administrator"));
    });
    let dropped = Arc::new(AtomicBool::new(false));
    let guard = DropFlag(dropped.clone());
    let got = Client::new(&fake.addr)
        .run("w", LEASE, |_| async move {
            let _guard = guard;
            std::future::pending::<Result<(), Error>>().await
        })
        .await;
    assert!(matches!(&got, Err(Error::Lost { .. })), "{got:?}");
    assert_eq!(got.unwrap_err().code(), Some(0x02));
    assert!(
        dropped.load(Ordering::SeqCst),
        "the work's future was dropped"
    );
}

struct DropFlag(Arc<AtomicBool>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn the_servers_close_while_holding_is_a_loss() {
    let fake = Fake::start(|_, mut c| {
        read_acquire(&mut c);
        send(&mut c, &acquired(T));
    });
    let lock = Client::new(&fake.addr)
        .lock("e", Duration::from_secs(10))
        .await
        .unwrap();
    let lost = lock.lost().await;
    assert!(
        matches!(&lost, Error::Lost { cause } if matches!(**cause, Error::Unavailable(_))),
        "{lost:?}"
    );
    assert!(!lock.is_valid());
    assert!(matches!(lock.release().await, Err(Error::Lost { .. })));
}

#[test]
fn dropping_a_lock_outside_the_runtime_closes_it_and_leaves_no_task() {
    let (tx, mut rx) = unbounded_channel();
    let fake = Fake::start(move |_, mut c| {
        read_acquire(&mut c);
        send(&mut c, &acquired(T));
        release_and_close(&mut c);
        tx.send("closed").unwrap();
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let lock = rt
        .block_on(Client::new(&fake.addr).lock("d", Duration::from_secs(10)))
        .unwrap();
    assert_eq!(rt.metrics().num_alive_tasks(), 1, "the session's task");
    drop(lock); // no runtime context here
    assert_eq!(rt.block_on(hear(&mut rx)), "closed");
    rt.block_on(async {
        while tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
            > 0
        {
            tokio::task::yield_now().await;
        }
    });
}

#[tokio::test]
async fn bad_input_is_refused_before_connecting() {
    let fake = Fake::start(|_, _| {});
    let client = Client::new(&fake.addr);
    let long = [b'a'; 256];
    let cases: [(&[u8], Duration); 5] = [
        (b"", LEASE),
        (&long, LEASE),
        (b"\xff", LEASE),
        (b"x", Duration::ZERO),
        (b"x", monolock::MAX_LEASE + Duration::from_nanos(1)),
    ];
    for (name, lease) in cases {
        let got = client.lock(name, lease).await;
        assert!(
            matches!(got, Err(Error::InvalidInput(_))),
            "{name:?} {lease:?}: {got:?}"
        );
    }
    assert!(matches!(
        Client::new("nonsense").lock("x", LEASE).await,
        Err(Error::InvalidInput(_))
    ));
    assert_eq!(
        fake.accepted(Duration::from_millis(100)),
        None,
        "no connection at all"
    );
}

#[tokio::test]
async fn a_silent_server_is_given_up_and_closed() {
    let (tx, mut rx) = unbounded_channel();
    let fake = Fake::start(move |_, mut c| {
        read_acquire(&mut c);
        read_reset(&mut c); // never answers: given up, reset
        tx.send("closed").unwrap();
    });
    let got = Client::new(&fake.addr)
        .lock("s", Duration::from_millis(200))
        .await;
    assert!(matches!(got, Err(Error::Unavailable(_))), "{got:?}");
    assert_eq!(hear(&mut rx).await, "closed");
}

#[tokio::test]
async fn a_dead_server_is_unavailable() {
    let got = Client::new(dead_address()).lock("x", LEASE).await;
    assert!(
        matches!(&got, Err(e) if e.is_retriable() && matches!(e, Error::Unavailable(_))),
        "{got:?}"
    );
}

#[tokio::test]
async fn the_promotion_push_in_the_read_of_a_late_answer_grants_the_lock() {
    let fake = Fake::start(|_, mut c| {
        queued_then_late(&mut c, Duration::from_millis(700), &acquired(T), T)
    });
    let lock = Client::new(&fake.addr)
        .lock("p", Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(lock.token(), T);
    lock.release().await.unwrap();
}

#[tokio::test]
async fn shutting_down_in_the_read_of_a_late_answer_is_retried_by_run() {
    let fake = Fake::start(|n, mut c| late_shutdown_then_grant(n, &mut c));
    let token = Client::new(&fake.addr)
        .run("s", Duration::from_secs(2), |lock| async move {
            Ok::<_, Error>(lock.token())
        })
        .await
        .unwrap();
    assert_eq!(token, 7, "granted on the second connection");
}

#[tokio::test]
async fn release_resets_a_server_that_never_closes() {
    let (tx, mut rx) = unbounded_channel();
    let fake = Fake::start(move |_, mut c| {
        grant_and_never_close(&mut c, T);
        tx.send("reset").unwrap();
    });
    let lock = Client::new(&fake.addr).lock("n", LEASE).await.unwrap();
    lock.release().await.unwrap();
    assert_eq!(hear(&mut rx).await, "reset");
}

#[tokio::test]
async fn an_old_servers_error_after_release_is_the_end_not_an_error() {
    let (tx, mut rx) = unbounded_channel();
    let fake = Fake::start(move |_, mut c| {
        grant_as_an_old_server(&mut c, T);
        tx.send("closed").unwrap();
    });
    let lock = Client::new(&fake.addr).lock("o", LEASE).await.unwrap();
    lock.release().await.unwrap();
    assert_eq!(hear(&mut rx).await, "closed");
}

#[tokio::test]
async fn several_addresses_start_from_the_one_that_worked_last() {
    let closed = dead_address();
    let fake = Fake::start(|_, mut c| {
        read_acquire(&mut c);
        send(&mut c, &acquired(T));
        release_and_close(&mut c);
    });
    let client = Client::from_addresses([closed.as_str(), fake.addr.as_str()]);
    // The first address refuses: the second grants, within one attempt.
    let lock = client.lock("m", LEASE).await.unwrap();
    assert_eq!(lock.token(), T);
    lock.release().await.unwrap();
    // The closed address comes to life, refusing every request; the next
    // attempt starts from the address that worked, and so does a clone's.
    let revived = Fake::start_at(&closed, |_, mut c| {
        read_acquire(&mut c);
        send(&mut c, &error(0x10, "not this one"));
    });
    for c in [client.clone(), client] {
        c.lock("m", LEASE).await.unwrap().release().await.unwrap();
    }
    assert_eq!(revived.accepted(Duration::ZERO), None);
    // A new client starts from the first address: it is up now.
    let got = Client::from_addresses([closed.as_str(), fake.addr.as_str()])
        .lock("m", LEASE)
        .await;
    assert_eq!(got.unwrap_err().code(), Some(0x10));
    assert_eq!(revived.accepted(PATIENCE), Some(0));
}

#[tokio::test]
async fn no_address_at_all_is_invalid_input() {
    let none: [&str; 0] = [];
    let got = Client::from_addresses(none).lock("m", LEASE).await;
    assert!(matches!(got, Err(Error::InvalidInput(_))), "{got:?}");
}
