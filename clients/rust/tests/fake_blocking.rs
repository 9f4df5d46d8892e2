//! The blocking client against a scripted fake server.
#![cfg(feature = "blocking")]

mod support;

use std::sync::mpsc;
use std::time::Duration;

use monolock::blocking::Client;
use monolock::Error;
use support::*;

const T: u64 = u64::MAX;
const LEASE: Duration = Duration::from_millis(400);

fn hear(rx: &mpsc::Receiver<&'static str>) -> &'static str {
    rx.recv_timeout(PATIENCE)
        .expect("the fake server's word in time")
}

#[test]
fn heartbeats_are_answered_and_release_waits_for_the_servers_close() {
    let (tx, rx) = mpsc::channel();
    let fake = Fake::start(move |_, mut c| {
        assert_eq!(read_acquire(&mut c), (400, "é/x".as_bytes().to_vec()));
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
    let lock = Client::new(&fake.addr).lock("é/x", LEASE).unwrap();
    assert_eq!(lock.token(), T);
    assert_eq!(hear(&rx), "two heartbeats");
    assert!(lock.lost_error().is_none());
    lock.release().unwrap();
    assert_eq!(hear(&rx), "closed");
}

#[test]
fn a_queued_lock_is_granted_by_the_push_and_try_lock_is_busy() {
    let fake = Fake::start(|n, mut c| {
        read_acquire(&mut c);
        send(&mut c, &WAITING);
        if n == 0 {
            send(&mut c, &acquired(T));
            answer_heartbeats(&mut c, T);
        } else {
            release_and_close(&mut c);
        }
    });
    let client = Client::new(&fake.addr);
    let lock = client.lock("q", Duration::from_secs(10)).unwrap();
    assert_eq!(lock.token(), T);
    assert!(lock.is_valid());
    assert!(matches!(client.try_lock("q", LEASE), Err(Error::Busy)));
}

#[test]
fn run_retries_a_server_condition() {
    let fake = Fake::start(|n, mut c| {
        read_acquire(&mut c);
        if n == 0 {
            send(&mut c, &error(0x05, ""));
            return;
        }
        send(&mut c, &acquired(7));
        answer_heartbeats(&mut c, 7);
    });
    let token = Client::new(&fake.addr)
        .run("r", LEASE, |lock| Ok::<_, Error>(lock.token()))
        .unwrap();
    assert_eq!(token, 7);
}

#[test]
fn a_loss_while_the_work_runs_is_returned_after_it() {
    let fake = Fake::start(|_, mut c| {
        read_acquire(&mut c);
        send(&mut c, &acquired(T));
        send(&mut c, &error(0x02, "closed by administrator"));
    });
    let got = Client::new(&fake.addr).run("w", Duration::from_secs(10), |lock| {
        assert!(lock.wait_lost(PATIENCE), "the loss is seen by the work");
        assert!(!lock.is_valid());
        Ok::<_, Error>(())
    });
    assert_eq!(got.unwrap_err().code(), Some(0x02));
}

#[test]
fn dropping_a_lock_closes_its_connection() {
    let (tx, rx) = mpsc::channel();
    let fake = Fake::start(move |_, mut c| {
        read_acquire(&mut c);
        send(&mut c, &acquired(T));
        release_and_close(&mut c);
        tx.send("closed").unwrap();
    });
    let lock = Client::new(&fake.addr)
        .lock("d", Duration::from_secs(10))
        .unwrap();
    drop(lock);
    assert_eq!(hear(&rx), "closed");
}

#[test]
fn bad_input_is_refused_before_connecting() {
    let fake = Fake::start(|_, _| {});
    let client = Client::new(&fake.addr);
    for (name, lease) in [
        (&b""[..], LEASE),
        (&[b'a'; 256][..], LEASE),
        (&b"\xc3"[..], LEASE),
        (&b"x"[..], Duration::from_micros(999)),
    ] {
        assert!(
            matches!(client.lock(name, lease), Err(Error::InvalidInput(_))),
            "{name:?}"
        );
    }
    assert_eq!(
        fake.accepted(Duration::from_millis(100)),
        None,
        "no connection at all"
    );
}

#[test]
fn a_silent_server_is_given_up_and_closed() {
    let (tx, rx) = mpsc::channel();
    let fake = Fake::start(move |_, mut c| {
        read_acquire(&mut c);
        read_reset(&mut c); // never answers: given up, reset
        tx.send("closed").unwrap();
    });
    let got = Client::new(&fake.addr).lock("s", Duration::from_millis(200));
    assert!(matches!(got, Err(Error::Unavailable(_))), "{got:?}");
    assert_eq!(hear(&rx), "closed");
}

#[test]
fn a_dead_server_is_unavailable() {
    assert!(matches!(
        Client::new(dead_address()).lock("x", LEASE),
        Err(Error::Unavailable(_))
    ));
}

#[test]
fn the_promotion_push_in_the_read_of_a_late_answer_grants_the_lock() {
    let fake = Fake::start(|_, mut c| {
        queued_then_late(&mut c, Duration::from_millis(700), &acquired(T), T)
    });
    let lock = Client::new(&fake.addr)
        .lock("p", Duration::from_secs(2))
        .unwrap();
    assert_eq!(lock.token(), T);
    lock.release().unwrap();
}

#[test]
fn shutting_down_in_the_read_of_a_late_answer_is_retried_by_run() {
    let fake = Fake::start(|n, mut c| late_shutdown_then_grant(n, &mut c));
    let token = Client::new(&fake.addr)
        .run("s", Duration::from_secs(2), |lock| {
            Ok::<_, Error>(lock.token())
        })
        .unwrap();
    assert_eq!(token, 7, "granted on the second connection");
}

#[test]
fn release_resets_a_server_that_never_closes() {
    let (tx, rx) = mpsc::channel();
    let fake = Fake::start(move |_, mut c| {
        grant_and_never_close(&mut c, T);
        tx.send("reset").unwrap();
    });
    let lock = Client::new(&fake.addr).lock("n", LEASE).unwrap();
    lock.release().unwrap();
    assert_eq!(hear(&rx), "reset");
}

#[test]
fn an_old_servers_error_after_release_is_the_end_not_an_error() {
    let (tx, rx) = mpsc::channel();
    let fake = Fake::start(move |_, mut c| {
        grant_as_an_old_server(&mut c, T);
        tx.send("closed").unwrap();
    });
    let lock = Client::new(&fake.addr).lock("o", LEASE).unwrap();
    lock.release().unwrap();
    assert_eq!(hear(&rx), "closed");
}

#[cfg(feature = "tls")]
#[test]
fn the_tls_handshake_is_bounded_by_the_connect_timeout() {
    let fake = Fake::start(|_, mut c| drip(&mut c));
    let client = Client::new(&fake.addr)
        .with_tls(tls_config_trusting_nothing())
        .with_connect_timeout(Duration::from_millis(300));
    let got = client.lock("d", LEASE);
    match &got {
        Err(Error::Unavailable(m)) => assert!(m.contains("timed out"), "{m}"),
        other => panic!("want the connect timeout, got {other:?}"),
    }
}

#[test]
fn several_addresses_start_from_the_one_that_worked_last() {
    let closed = dead_address();
    let fake = Fake::start(|_, mut c| {
        read_acquire(&mut c);
        send(&mut c, &acquired(T));
        release_and_close(&mut c);
    });
    let client = Client::from_addresses([closed.as_str(), fake.addr.as_str()]);
    // The first address refuses: the second grants, within one attempt.
    let lock = client.lock("m", LEASE).unwrap();
    assert_eq!(lock.token(), T);
    lock.release().unwrap();
    // The closed address comes to life, refusing every request; the next
    // attempt starts from the address that worked.
    let revived = Fake::start_at(&closed, |_, mut c| {
        read_acquire(&mut c);
        send(&mut c, &error(0x10, "not this one"));
    });
    client.lock("m", LEASE).unwrap().release().unwrap();
    assert_eq!(revived.accepted(Duration::ZERO), None);
    // A new client starts from the first address: it is up now.
    let got = Client::from_addresses([closed.as_str(), fake.addr.as_str()]).lock("m", LEASE);
    assert_eq!(got.unwrap_err().code(), Some(0x10));
    assert_eq!(revived.accepted(PATIENCE), Some(0));
}
