//! `tablepin ui`: a local, read-only web page of the repository.
//!
//! `route` decides what a request asks for (no I/O), `api` reads each
//! answer from the repository as the commands' `--json` does, `history`
//! places versions on lanes; this module listens on 127.0.0.1 and writes
//! the answers. The page (`index.html`, `app.js`, `app.css`) is built into
//! the binary and served with a policy that lets it fetch from this server
//! only.

mod api;
mod history;
mod route;

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use serde_json::{json, Value};
use tablepin::Repo;

use crate::cli::UiArgs;
use route::{Refusal, Route};

/// Requests answered at once: a long diff does not hold up the history.
const WORKERS: usize = 4;

/// What the browser may load and run: this server's files only, no inline
/// code, no frames, no forms.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub async fn ui(repo: &Repo, a: UiArgs, json_out: bool) -> Result<ExitCode> {
    let server = tiny_http::Server::http(("127.0.0.1", a.port)).map_err(|e| {
        anyhow!(
            "cannot listen on 127.0.0.1:{}: {e}; give another --port, or none for a free one",
            a.port
        )
    })?;
    let port = server
        .server_addr()
        .to_ip()
        .map(|addr| addr.port())
        .ok_or_else(|| anyhow!("internal: the page's server has no IP address"))?;
    let url = format!("http://127.0.0.1:{port}/");
    let location = repo.store().location();
    if json_out {
        let line = json!({ "url": url, "repository": location, "read_only": true });
        outln!("{}", serde_json::to_string(&line)?);
    } else {
        outln!("Serving {location} at {url} (read-only; Ctrl-C stops)");
    }
    std::io::stdout().flush()?;
    let answers = api::Answers::new(repo);
    let rt = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| {
        std::thread::scope(|s| {
            for _ in 0..WORKERS {
                s.spawn(|| {
                    for request in server.incoming_requests() {
                        let reply = rt.block_on(reply_to(&answers, &request, port));
                        // A page closed before its answer was written:
                        // there is no one left to tell.
                        let _ = request.respond(reply.into_response());
                    }
                });
            }
        });
    });
    Ok(ExitCode::SUCCESS)
}

/// An answer before it is written: status, type and body.
struct Reply {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
}

impl Reply {
    fn json(status: u16, v: &Value) -> Self {
        Reply {
            status,
            content_type: "application/json",
            body: serde_json::to_vec(v).unwrap_or_default(),
        }
    }

    fn refused(r: &Refusal) -> Self {
        Reply::json(r.status, &json!({ "error": r.message }))
    }

    fn into_response(self) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
        let headers = [
            ("Content-Type", self.content_type),
            ("Content-Security-Policy", POLICY),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
        ];
        headers.into_iter().fold(
            tiny_http::Response::from_data(self.body).with_status_code(self.status),
            |r, (name, value)| match tiny_http::Header::from_bytes(name, value) {
                Ok(h) => r.with_header(h),
                Err(()) => r,
            },
        )
    }
}

async fn reply_to(answers: &api::Answers<'_>, request: &tiny_http::Request, port: u16) -> Reply {
    let host = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Host"))
        .map(|h| h.value.as_str());
    if !route::host_allowed(host, port) {
        return Reply::refused(&Refusal {
            status: 403,
            message: format!(
                "this page answers requests for 127.0.0.1:{port} or localhost:{port} only, not {}",
                host.unwrap_or("a request with no Host")
            ),
        });
    }
    match route::route(request.method().as_str(), request.url()) {
        Err(r) => Reply::refused(&r),
        Ok(Route::Asset(a)) => Reply {
            status: 200,
            content_type: a.content_type,
            body: a.body.as_bytes().to_vec(),
        },
        Ok(route) => match answers.answer(route).await {
            Ok(v) => Reply::json(200, &v),
            Err(e) => {
                let code = crate::exit_code(&e);
                let status = match code {
                    2 => 400,
                    3 => 404,
                    4 => 409,
                    _ => 500,
                };
                Reply::json(
                    status,
                    &json!({ "error": crate::message(&e, false), "code": crate::code_name(code) }),
                )
            }
        },
    }
}
