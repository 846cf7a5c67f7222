//! A store that fails, delays and drops requests by a seeded schedule, for
//! tests of what a command leaves behind when its store misbehaves as a
//! remote one does: server errors, throttling, timeouts, a write that lands
//! but reports failure, a read that returns fewer bytes than it should.
//!
//! The CLI's test builds (`--features testing`) turn it on with
//! `TABLEPIN_FAULTS=seed=N,rate=R` (a test hook, like
//! `TABLEPIN_FAULT_AFTER_WRITES`).

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A fault the schedule can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The server answers 500.
    Internal,
    /// The server answers 503.
    Unavailable,
    /// The server throttles (S3's 503 SlowDown, GCS's 429).
    Throttled,
    /// The request times out: it is not made.
    Timeout,
    /// A write lands, but the answer is lost: the caller sees a timeout.
    LandedButFailed,
    /// A read returns only part of the object.
    Truncated,
    /// The request is made after a delay.
    Delay,
}

impl Fault {
    fn message(self) -> &'static str {
        match self {
            Fault::Internal => "injected fault: 500 Internal Server Error",
            Fault::Unavailable => "injected fault: 503 Service Unavailable",
            Fault::Throttled => "injected fault: 503 SlowDown (throttled)",
            Fault::Timeout | Fault::LandedButFailed => "injected fault: the request timed out",
            Fault::Truncated | Fault::Delay => "injected fault",
        }
    }
}

/// The schedule: a seed and the share of requests that get a fault.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultPlan {
    /// Seeds the schedule: the same seed and the same requests give the
    /// same faults.
    pub seed: u64,
    /// The share of requests that get a fault, from 0 to 1.
    pub rate: f64,
}

impl FaultPlan {
    /// Reads `seed=N,rate=R` (either may be left out: seed 0, rate 0.1).
    pub fn parse(s: &str) -> Option<FaultPlan> {
        let mut plan = FaultPlan { seed: 0, rate: 0.1 };
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('=')? {
                ("seed", v) => plan.seed = v.parse().ok()?,
                ("rate", v) => plan.rate = v.parse().ok().filter(|r| (0.0..=1.0).contains(r))?,
                _ => return None,
            }
        }
        Some(plan)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Write,
    Other,
}

/// A store wrapper that injects faults by a [`FaultPlan`].
pub struct Faulty {
    inner: Arc<dyn ObjectStore>,
    schedule: Arc<Schedule>,
}

/// Which request gets which fault.
struct Schedule {
    rate: f64,
    rng: Mutex<ChaCha8Rng>,
    /// Faults for the first requests, in order, before the seeded ones.
    script: Mutex<std::collections::VecDeque<Option<Fault>>>,
    injected: Arc<AtomicU64>,
}

impl fmt::Debug for Faulty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Faulty({}, rate {})", self.inner, self.schedule.rate)
    }
}

impl fmt::Display for Faulty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

fn fail(fault: Fault) -> object_store::Error {
    object_store::Error::Generic {
        store: "faults",
        source: fault.message().into(),
    }
}

impl Faulty {
    /// Wraps a store.
    pub fn new(inner: Arc<dyn ObjectStore>, plan: FaultPlan) -> Self {
        Self {
            inner,
            schedule: Arc::new(Schedule {
                rate: plan.rate,
                rng: Mutex::new(ChaCha8Rng::seed_from_u64(plan.seed)),
                script: Mutex::default(),
                injected: Arc::default(),
            }),
        }
    }

    /// Wraps a store whose first requests get the faults of `script`, in
    /// order (`None`: no fault), and no request after them.
    pub fn scripted(inner: Arc<dyn ObjectStore>, script: Vec<Option<Fault>>) -> Self {
        let faulty = Self::new(inner, FaultPlan { seed: 0, rate: 0.0 });
        *faulty
            .schedule
            .script
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = script.into();
        faulty
    }

    /// The count of faults injected so far, shared.
    pub fn injected(&self) -> Arc<AtomicU64> {
        self.schedule.injected.clone()
    }

    fn draw(&self, op: Op) -> Option<Fault> {
        self.schedule.draw(op)
    }

    /// Sleeps as a slow request would, then fails unless the fault lets the
    /// request be made.
    async fn before(&self, fault: Option<Fault>) -> Result<()> {
        match fault {
            Some(Fault::Delay) => {
                tokio::time::sleep(Duration::from_millis(5)).await;
                Ok(())
            }
            Some(Fault::Timeout) => {
                tokio::time::sleep(Duration::from_millis(2)).await;
                Err(fail(Fault::Timeout))
            }
            Some(f @ (Fault::Internal | Fault::Unavailable | Fault::Throttled)) => Err(fail(f)),
            None | Some(Fault::LandedButFailed | Fault::Truncated) => Ok(()),
        }
    }
}

impl Schedule {
    /// The fault for the next request, if it gets one.
    fn draw(&self, op: Op) -> Option<Fault> {
        if let Some(next) = self
            .script
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
        {
            if next.is_some() {
                self.injected.fetch_add(1, Ordering::Relaxed);
            }
            return next;
        }
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        if !rng.random_bool(self.rate) {
            return None;
        }
        let kinds: &[Fault] = match op {
            Op::Read => &[
                Fault::Internal,
                Fault::Unavailable,
                Fault::Throttled,
                Fault::Timeout,
                Fault::Truncated,
                Fault::Delay,
            ],
            Op::Write => &[
                Fault::Internal,
                Fault::Unavailable,
                Fault::Throttled,
                Fault::Timeout,
                Fault::LandedButFailed,
                Fault::Delay,
            ],
            Op::Other => &[
                Fault::Internal,
                Fault::Unavailable,
                Fault::Throttled,
                Fault::Timeout,
                Fault::Delay,
            ],
        };
        let fault = kinds[rng.random_range(0..kinds.len())];
        self.injected.fetch_add(1, Ordering::Relaxed);
        Some(fault)
    }
}

#[async_trait::async_trait]
impl ObjectStore for Faulty {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let fault = self.draw(Op::Write);
        self.before(fault).await?;
        let out = self.inner.put_opts(location, payload, opts).await?;
        if fault == Some(Fault::LandedButFailed) {
            return Err(fail(Fault::LandedButFailed));
        }
        Ok(out)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.before(self.draw(Op::Other)).await?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let fault = self.draw(Op::Read);
        self.before(fault).await?;
        let head = options.head;
        let got = self.inner.get_opts(location, options).await?;
        if head || fault != Some(Fault::Truncated) {
            return Ok(got);
        }
        // The body ends early: half of it arrives, as from a dropped
        // connection that the client did not notice.
        let (meta, range, attributes) =
            (got.meta.clone(), got.range.clone(), got.attributes.clone());
        let bytes = got.bytes().await?;
        let cut = bytes.slice(..bytes.len() / 2);
        let stream = futures::stream::once(async move { Ok(cut) }).boxed();
        Ok(GetResult {
            payload: GetResultPayload::Stream(stream),
            meta,
            range,
            attributes,
        })
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.before(self.draw(Op::Other)).await?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        // A failed delete leaves the object; the next gc deletes it.
        let schedule = self.schedule.clone();
        let locations = locations
            .map(move |l| match (l, schedule.draw(Op::Other)) {
                (Ok(_), Some(f)) if f != Fault::Delay => Err(fail(f)),
                (l, _) => l,
            })
            .boxed();
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        match self.draw(Op::Other) {
            Some(f) if f != Fault::Delay => {
                futures::stream::once(async move { Err(fail(f)) }).boxed()
            }
            _ => self.inner.list(prefix),
        }
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        match self.draw(Op::Other) {
            Some(f) if f != Fault::Delay => {
                futures::stream::once(async move { Err(fail(f)) }).boxed()
            }
            _ => self.inner.list_with_offset(prefix, offset),
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.before(self.draw(Op::Other)).await?;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.before(self.draw(Op::Other)).await?;
        self.inner.copy_opts(from, to, options).await
    }
}
