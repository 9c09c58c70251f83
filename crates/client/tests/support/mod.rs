//! Shared by the client's integration tests: bounded async waits. The server
//! and its binary come from the test kit (crates/testkit).

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use toolsrv_testkit::WAIT;

/// Run `fut` with the test's time bound.
pub async fn bounded<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .expect("test step timed out")
}

/// Wait until `cond` holds (checked after every reply-processing chance).
pub async fn until(mut cond: impl FnMut() -> bool) {
    bounded(async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
}
