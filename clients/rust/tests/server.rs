//! Both clients against the real server (`MONOLOCK_BIN`, from `make build`).
#![cfg(any(feature = "tokio", feature = "blocking"))]

mod support;

use std::time::Duration;

use monolock::Error;
use support::*;

const LEASE: Duration = Duration::from_secs(2);

#[cfg(feature = "tokio")]
#[tokio::test]
async fn async_hold_queue_promote_and_run() {
    let Some(bin) = server_binary() else { return };
    let server = Server::start(&bin, &[]);
    let client = monolock::Client::new(&server.addr);
    let held = client.lock("nightly-import", LEASE).await.unwrap();
    assert!(held.is_valid());
    assert!(
        held.token() > 1 << 32,
        "the high bits are the server's clock"
    );
    assert!(matches!(
        client.try_lock("nightly-import", LEASE).await,
        Err(Error::Busy)
    ));
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move { client.lock("nightly-import", LEASE).await })
    };
    let first = held.token();
    held.release().await.unwrap();
    let promoted = waiter.await.unwrap().unwrap();
    assert!(promoted.token() > first);
    drop(promoted);
    let token = client
        .run("nightly-import", LEASE, |lock| async move {
            Ok::<_, Error>(lock.token())
        })
        .await
        .unwrap();
    assert!(token > first);
    let got = client.lock(vec![b'a'; 255], LEASE).await.unwrap();
    got.release().await.unwrap();
}

#[cfg(feature = "blocking")]
#[test]
fn blocking_hold_queue_promote_and_run() {
    let Some(bin) = server_binary() else { return };
    let server = Server::start(&bin, &[]);
    let client = monolock::blocking::Client::new(&server.addr);
    let held = client.lock("cron", LEASE).unwrap();
    assert!(matches!(client.try_lock("cron", LEASE), Err(Error::Busy)));
    assert!(matches!(
        // The wait counts from the connect: time to be queued first.
        client.lock_timeout("cron", LEASE, Duration::from_millis(500)),
        Err(Error::Busy)
    ));
    let waiter = {
        let client = client.clone();
        std::thread::spawn(move || client.lock("cron", LEASE))
    };
    let first = held.token();
    assert!(!held.wait_lost(Duration::ZERO));
    held.release().unwrap();
    let promoted = waiter.join().unwrap().unwrap();
    assert!(promoted.token() > first);
    promoted.release().unwrap();
    let token = client
        .run("cron", LEASE, |lock| Ok::<_, Error>(lock.token()))
        .unwrap();
    assert!(token > first);
}

#[cfg(feature = "tokio")]
#[tokio::test]
async fn async_release_leaves_no_time_wait_on_the_client_and_promotes_the_waiter() {
    let Some(bin) = server_binary() else { return };
    let server = Server::start(&bin, &[]);
    let client = monolock::Client::new(&server.addr);
    let held = client.lock("tw", LEASE).await.unwrap();
    // /proc/net/tcp may be long: read off the runtime, whose one thread
    // runs the session's heartbeats.
    let server_port = port_of(&server.addr);
    let port = tokio::task::spawn_blocking(move || client_port_towards(server_port))
        .await
        .unwrap()
        .expect("the holder's connection");
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move { client.lock("tw", LEASE).await })
    };
    let first = held.token();
    held.release().await.unwrap();
    let time_wait = tokio::task::spawn_blocking(move || time_wait_on(port, server_port));
    assert!(
        !time_wait.await.unwrap(),
        "a TIME_WAIT on the client's port {port}"
    );
    let promoted = waiter.await.unwrap().unwrap();
    assert!(promoted.token() > first);
    promoted.release().await.unwrap();
}

#[cfg(feature = "blocking")]
#[test]
fn blocking_release_leaves_no_time_wait_on_the_client_and_promotes_the_waiter() {
    let Some(bin) = server_binary() else { return };
    let server = Server::start(&bin, &[]);
    let client = monolock::blocking::Client::new(&server.addr);
    let held = client.lock("tw", LEASE).unwrap();
    let port = client_port_towards(port_of(&server.addr)).expect("the holder's connection");
    let waiter = {
        let client = client.clone();
        std::thread::spawn(move || client.lock("tw", LEASE))
    };
    let first = held.token();
    held.release().unwrap();
    assert!(
        !time_wait_on(port, port_of(&server.addr)),
        "a TIME_WAIT on the client's port {port}"
    );
    let promoted = waiter.join().unwrap().unwrap();
    assert!(promoted.token() > first);
    promoted.release().unwrap();
}

/// A closed port first, then the server: granted by the second address;
/// and a DNS name (localhost: 127.0.0.1, maybe ::1 too, where nothing
/// listens) whose every address is a candidate.
#[cfg(feature = "tokio")]
#[tokio::test]
async fn async_several_addresses_a_closed_port_then_the_server() {
    let Some(bin) = server_binary() else { return };
    let server = Server::start(&bin, &[]);
    let client = monolock::Client::from_addresses([dead_address(), server.addr.clone()]);
    let lock = client.lock("several", LEASE).await.unwrap();
    assert!(lock.is_valid());
    lock.release().await.unwrap();
    let by_name = format!("localhost:{}", port_of(&server.addr));
    let lock = monolock::Client::new(by_name)
        .lock("several", LEASE)
        .await
        .unwrap();
    lock.release().await.unwrap();
}

#[cfg(feature = "blocking")]
#[test]
fn blocking_several_addresses_a_closed_port_then_the_server() {
    let Some(bin) = server_binary() else { return };
    let server = Server::start(&bin, &[]);
    let client = monolock::blocking::Client::from_addresses([dead_address(), server.addr.clone()]);
    let lock = client.lock("several", LEASE).unwrap();
    assert!(lock.is_valid());
    lock.release().unwrap();
    let by_name = format!("localhost:{}", port_of(&server.addr));
    let lock = monolock::blocking::Client::new(by_name)
        .lock("several", LEASE)
        .unwrap();
    lock.release().unwrap();
}
