//! Requests tried again when they fail for a reason that may pass.
//!
//! Failures that may pass (5xx, throttling, timeouts, a read shorter than
//! the object's range) are tried 4 times in all, with a pause that
//! quadruples from 25 ms; `object_store`'s own HTTP retries come first.
//! A retried put-if-absent is ambiguous: its first attempt may have
//! landed. A blob that then "already exists" is fine (same name, same
//! bytes). A ref entry that already exists is compared with this writer's
//! bytes, and when they are equal it is this writer's own (time, author,
//! message and target make another writer's entry differ), not a conflict
//! to rebase on. A document (audit record, tombstone, lease) is compared
//! the same way when an earlier attempt of the same call failed.

/// How often a request that failed for a reason that may pass is made in
/// all, and the pause before the first retry (it quadruples each time).
pub(crate) const ATTEMPTS: u32 = 4;
pub(crate) const FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(25);

/// True when an object store's failure may pass if the request is made
/// again: server errors, throttling, timeouts, dropped connections and short
/// reads, as opposed to answers about the object or the caller.
pub(crate) fn transient(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    !matches!(
        e,
        E::NotFound { .. }
            | E::AlreadyExists { .. }
            | E::Precondition { .. }
            | E::NotModified { .. }
            | E::NotImplemented { .. }
            | E::NotSupported { .. }
            | E::PermissionDenied { .. }
            | E::Unauthenticated { .. }
            | E::InvalidPath { .. }
            | E::UnknownConfigurationKey { .. }
    )
}

/// Makes a request (`op(attempt)`) until it succeeds, fails for a lasting
/// reason, or has been made [`ATTEMPTS`] times; the last answer is returned.
pub(crate) async fn retried<T, F, Fut>(mut op: F) -> std::result::Result<T, object_store::Error>
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, object_store::Error>>,
{
    let mut attempt = 0;
    loop {
        match op(attempt).await {
            Err(e) if transient(&e) && attempt + 1 < ATTEMPTS => {
                let pause = FIRST_PAUSE * 4u32.pow(attempt);
                match tokio::runtime::Handle::try_current() {
                    Ok(_) => tokio::time::sleep(pause).await,
                    // A worker thread reading a local blob (`map_blobs`).
                    Err(_) => std::thread::sleep(pause),
                }
                attempt += 1;
            }
            answer => return answer,
        }
    }
}

/// A read that returned fewer bytes than the object's range holds.
pub(crate) fn short_read(got: usize, expected: u64) -> object_store::Error {
    object_store::Error::Generic {
        store: "tablepin",
        source: format!("the read returned {got} of {expected} bytes").into(),
    }
}
