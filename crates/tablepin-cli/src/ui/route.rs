//! What a request to the web page asks for, decided from its method, URL
//! and Host header alone (no I/O), so that every refusal is tested here.

use url::Url;

/// The most rows one page of a diff holds: the page never asks for a
/// whole table.
pub const MAX_PAGE: usize = 1000;

/// A file of the page, built into the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asset {
    pub body: &'static str,
    pub content_type: &'static str,
}

const ASSETS: [(&str, Asset); 4] = [
    (
        "/",
        Asset {
            body: include_str!("index.html"),
            content_type: "text/html; charset=utf-8",
        },
    ),
    (
        "/app.js",
        Asset {
            body: include_str!("app.js"),
            content_type: "text/javascript; charset=utf-8",
        },
    ),
    (
        "/app.css",
        Asset {
            body: include_str!("app.css"),
            content_type: "text/css; charset=utf-8",
        },
    ),
    (
        "/favicon.svg",
        Asset {
            body: include_str!("favicon.svg"),
            content_type: "image/svg+xml",
        },
    ),
];

/// A request the page understands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Asset(Asset),
    /// Branches, tags and every version they reach, with their lanes.
    History,
    /// One version's tables (`show --json`).
    Version {
        rev: String,
    },
    Diff(DiffQuery),
    /// What `gc --dry-run` with this policy would keep and delete.
    Retention(RetentionQuery),
    /// Every erasure's record (`audit --json`).
    Audit,
}

/// One page of the differing rows of one table between two revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffQuery {
    pub old: String,
    pub new: String,
    /// The table (default: the first that differs).
    pub table: Option<String>,
    /// Only rows of this kind (`added`, `removed`, `modified`).
    pub kind: Option<String>,
    pub offset: usize,
    pub limit: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionQuery {
    pub keep_last: Option<usize>,
    pub keep_within_ms: Option<i64>,
    pub keep_tags: bool,
}

/// A request refused: the HTTP status and one sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
}

fn refuse(status: u16, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        message: message.into(),
    }
}

/// True when the request was addressed to this server by its loopback
/// name: a page elsewhere that rebinds its own name to 127.0.0.1 sends
/// its own Host, and is refused.
pub fn host_allowed(host: Option<&str>, port: u16) -> bool {
    host.is_some_and(|h| h == format!("127.0.0.1:{port}") || h == format!("localhost:{port}"))
}

/// The route of a request, or why it is refused.
pub fn route(method: &str, target: &str) -> Result<Route, Refusal> {
    if method != "GET" && method != "HEAD" {
        return Err(refuse(
            405,
            format!("the page is read-only: {method} is not served, only GET"),
        ));
    }
    let url = Url::parse(&format!("http://127.0.0.1{target}"))
        .map_err(|e| refuse(400, format!("cannot read the address {target:?}: {e}")))?;
    let query: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    let param = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    let needed = |name: &str| {
        param(name).ok_or_else(|| refuse(400, format!("{} needs the parameter {name}", url.path())))
    };
    match url.path() {
        "/api/history" => Ok(Route::History),
        "/api/version" => Ok(Route::Version {
            rev: needed("rev")?,
        }),
        "/api/diff" => Ok(Route::Diff(DiffQuery {
            old: needed("old")?,
            new: needed("new")?,
            table: param("table"),
            kind: kind(param("kind"))?,
            offset: number(param("offset"), "offset")?.unwrap_or(0),
            limit: page_size(number(param("limit"), "limit")?)?,
        })),
        "/api/retention" => Ok(Route::Retention(RetentionQuery {
            keep_last: number(param("keep_last"), "keep_last")?,
            keep_within_ms: duration_ms(param("keep_within"))?,
            keep_tags: flag(param("keep_tags"), "keep_tags")?.unwrap_or(true),
        })),
        "/api/audit" => Ok(Route::Audit),
        path => ASSETS
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, a)| Route::Asset(*a))
            .ok_or_else(|| refuse(404, format!("there is no page at {path}; the page is at /"))),
    }
}

fn number(given: Option<String>, name: &str) -> Result<Option<usize>, Refusal> {
    given
        .map(|v| {
            v.parse().map_err(|_| {
                refuse(
                    400,
                    format!("{name} must be a whole number of 0 or more, not {v:?}"),
                )
            })
        })
        .transpose()
}

fn page_size(given: Option<usize>) -> Result<usize, Refusal> {
    match given {
        None => Ok(100),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(n) => Err(refuse(
            400,
            format!("limit must be 1 to {MAX_PAGE} rows a page, not {n}"),
        )),
    }
}

fn kind(given: Option<String>) -> Result<Option<String>, Refusal> {
    match given.as_deref() {
        None | Some("all") => Ok(None),
        Some("added" | "removed" | "modified") => Ok(given),
        Some(k) => Err(refuse(
            400,
            format!("kind must be added, removed, modified or all, not {k:?}"),
        )),
    }
}

fn flag(given: Option<String>, name: &str) -> Result<Option<bool>, Refusal> {
    match given.as_deref() {
        None => Ok(None),
        Some("true" | "1" | "on") => Ok(Some(true)),
        Some("false" | "0" | "off") => Ok(Some(false)),
        Some(v) => Err(refuse(
            400,
            format!("{name} must be true or false, not {v:?}"),
        )),
    }
}

fn duration_ms(given: Option<String>) -> Result<Option<i64>, Refusal> {
    given
        .map(|v| {
            humantime::parse_duration(&v)
                .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                .map_err(|e| {
                    refuse(
                        400,
                        format!(
                            "keep_within must be a duration such as 30d or 12h, not {v:?} ({e})"
                        ),
                    )
                })
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_its_assets_are_served_and_nothing_else() {
        let Ok(Route::Asset(a)) = route("GET", "/") else {
            panic!("/ is not the page")
        };
        assert!(a.body.contains("<html") && a.content_type.starts_with("text/html"));
        assert!(matches!(route("GET", "/app.js"), Ok(Route::Asset(_))));
        let e = route("GET", "/../.tablepin/refs").unwrap_err();
        assert_eq!(e.status, 404, "{e:?}");
        assert_eq!(route("GET", "/etc/passwd").unwrap_err().status, 404);
    }

    #[test]
    fn writes_are_refused_in_one_sentence() {
        for m in ["POST", "PUT", "DELETE", "PATCH"] {
            let e = route(m, "/api/history").unwrap_err();
            assert_eq!(e.status, 405);
            assert!(e.message.contains("read-only") && e.message.contains(m));
        }
    }

    #[test]
    fn a_diff_page_is_read_from_the_query() {
        let r = route(
            "GET",
            "/api/diff?old=week-51&new=main%7E3&kind=modified&offset=200&limit=50",
        );
        assert_eq!(
            r,
            Ok(Route::Diff(DiffQuery {
                old: "week-51".into(),
                new: "main~3".into(),
                table: None,
                kind: Some("modified".into()),
                offset: 200,
                limit: 50,
            }))
        );
        let Ok(Route::Diff(d)) = route("GET", "/api/diff?old=a&new=b&table=sales&kind=all") else {
            panic!()
        };
        assert_eq!(
            (d.table.as_deref(), d.kind, d.offset, d.limit),
            (Some("sales"), None, 0, 100)
        );
    }

    #[test]
    fn bad_parameters_are_named() {
        for (target, says) in [
            ("/api/diff?new=main", "needs the parameter old"),
            ("/api/diff?old=a&new=b&limit=0", "limit must be 1 to 1000"),
            ("/api/diff?old=a&new=b&limit=5000", "not 5000"),
            (
                "/api/diff?old=a&new=b&offset=-1",
                "offset must be a whole number",
            ),
            ("/api/diff?old=a&new=b&kind=changed", "kind must be added"),
            ("/api/version", "needs the parameter rev"),
            (
                "/api/retention?keep_last=four",
                "keep_last must be a whole number",
            ),
            (
                "/api/retention?keep_within=soon",
                "keep_within must be a duration",
            ),
            (
                "/api/retention?keep_tags=maybe",
                "keep_tags must be true or false",
            ),
        ] {
            let e = route("GET", target).unwrap_err();
            assert_eq!(e.status, 400, "{target}");
            assert!(e.message.contains(says), "{target}: {}", e.message);
        }
    }

    #[test]
    fn a_retention_rule_keeps_tags_unless_told() {
        let r = route("GET", "/api/retention?keep_last=4&keep_within=2d");
        assert_eq!(
            r,
            Ok(Route::Retention(RetentionQuery {
                keep_last: Some(4),
                keep_within_ms: Some(2 * 86_400_000),
                keep_tags: true,
            }))
        );
        let Ok(Route::Retention(q)) = route("GET", "/api/retention?keep_tags=false") else {
            panic!()
        };
        assert!(!q.keep_tags && q.keep_last.is_none());
    }

    #[test]
    fn only_the_loopback_names_of_this_port_are_served() {
        assert!(host_allowed(Some("127.0.0.1:8123"), 8123));
        assert!(host_allowed(Some("localhost:8123"), 8123));
        assert!(!host_allowed(Some("evil.example:8123"), 8123));
        assert!(!host_allowed(Some("127.0.0.1:80"), 8123));
        assert!(!host_allowed(None, 8123));
    }
}
