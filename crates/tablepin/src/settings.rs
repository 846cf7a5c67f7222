//! What a process configures from its environment. The entry points (the
//! command line, the Python module) read the environment and hand it to
//! [`Settings::from_vars`]; the engine, the store and the format read no
//! environment variable, so a program that embeds tablepin sets them in
//! code.

use tablepin_store::StoreSettings;

/// A process's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Who commits, named in each version and audit record.
    pub author: String,
    /// The stores': the local blob cache, request tracing.
    pub store: StoreSettings,
    /// Threads for CPU-bound work; `None`: every core.
    pub threads: Option<usize>,
}

impl Default for Settings {
    /// No author known ("unknown"), no cache, no tracing, every core.
    fn default() -> Self {
        Self {
            author: "unknown".into(),
            store: StoreSettings::default(),
            threads: None,
        }
    }
}

impl Settings {
    /// The settings the environment gives (`var` looks a variable up; the
    /// entry points pass `std::env::var`): the author is
    /// `TABLEPIN_AUTHOR`, else the login name (`USER`, `LOGNAME`,
    /// `USERNAME`), else "unknown"; the store's from `TABLEPIN_CACHE`,
    /// `TABLEPIN_CACHE_SIZE`, `XDG_CACHE_HOME`, `HOME` and
    /// `TABLEPIN_TRACE_REQUESTS`; the threads from `TABLEPIN_THREADS`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let author = ["TABLEPIN_AUTHOR", "USER", "LOGNAME", "USERNAME"]
            .iter()
            .find_map(|k| var(k).filter(|v| !v.trim().is_empty()))
            .unwrap_or_else(|| "unknown".into());
        Self {
            author,
            store: StoreSettings::from_vars(&var),
            threads: tablepin_format::threads_from(var("TABLEPIN_THREADS").as_deref()),
        }
    }

    /// Sets what is the whole process's: the threads CPU-bound work uses.
    pub fn apply_to_process(&self) {
        tablepin_format::set_threads(self.threads);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(vars: &[(&str, &str)]) -> Settings {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_vars(|k| vars.get(k).cloned())
    }

    #[test]
    fn the_environment_decides_author_cache_tracing_and_threads() {
        let none = from(&[]);
        assert_eq!(none, Settings::default());
        let s = from(&[
            ("USER", "ann"),
            ("HOME", "/home/ann"),
            ("TABLEPIN_THREADS", "2"),
            ("TABLEPIN_TRACE_REQUESTS", "1"),
        ]);
        assert_eq!(s.author, "ann");
        assert_eq!(s.threads, Some(2));
        assert!(s.store.trace_requests);
        let cache = s.store.cache.unwrap();
        assert_eq!(
            cache.root,
            std::path::Path::new("/home/ann/.cache/tablepin/blobs")
        );
        assert_eq!(cache.limit, 10 << 30);
        let s = from(&[
            ("TABLEPIN_AUTHOR", "ci"),
            ("USER", "ann"),
            ("TABLEPIN_CACHE", "off"),
            ("HOME", "/home/ann"),
            ("TABLEPIN_THREADS", "0"),
        ]);
        assert_eq!(
            (s.author.as_str(), s.store.cache, s.threads),
            ("ci", None, None)
        );
        let s = from(&[("TABLEPIN_CACHE", "/c"), ("TABLEPIN_CACHE_SIZE", "1000")]);
        let cache = s.store.cache.unwrap();
        assert_eq!((cache.root.to_str(), cache.limit), (Some("/c"), 1000));
    }
}
