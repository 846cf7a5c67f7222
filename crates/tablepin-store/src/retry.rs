//! Requests tried again when they fail for a reason that may pass.

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
