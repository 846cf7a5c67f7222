//! Test hooks, compiled only with the `testing` feature (and in this
//! crate's tests): a crash before the N+1-th write, a seeded or scripted
//! fault schedule, added latency. The installed binary has none of them.

use std::sync::Arc;

use crate::{faults, Store};

impl Store {
    /// Stops the process (as a crash would) before the write after `n`
    /// writes. For crash-safety tests only.
    pub fn with_fault_after(mut self, n: Option<u64>) -> Self {
        self.fault_after = n;
        self
    }

    /// Puts a seeded fault schedule ([`faults::Faulty`]) between this
    /// handle and its store. For tests of failure handling only.
    pub fn with_faults(self, plan: faults::FaultPlan) -> Self {
        let faulty = faults::Faulty::new(self.raw.clone(), plan);
        self.with_faulty(faulty)
    }

    /// Adds `latency` before every request, as a distant store would
    /// (`object_store`'s throttling wrapper). For benchmarks.
    pub fn with_latency(mut self, latency: std::time::Duration) -> Self {
        let config = object_store::throttle::ThrottleConfig {
            wait_delete_per_call: latency,
            wait_get_per_call: latency,
            wait_list_per_call: latency,
            wait_list_with_delimiter_per_call: latency,
            wait_put_per_call: latency,
            ..Default::default()
        };
        self.raw = Arc::new(object_store::throttle::ThrottledStore::new(
            self.raw.clone(),
            config,
        ));
        let raw = self.raw.clone();
        self.through(raw)
    }

    /// Puts a fixed list of faults ([`faults::Faulty::scripted`]) before
    /// this handle's first requests. For tests only.
    pub fn with_fault_script(self, script: Vec<Option<faults::Fault>>) -> Self {
        let faulty = faults::Faulty::scripted(self.raw.clone(), script);
        self.with_faulty(faulty)
    }

    pub(crate) fn with_faulty(mut self, faulty: faults::Faulty) -> Self {
        self.faults = Some(faulty.injected());
        self.through(Arc::new(faulty))
    }
}
