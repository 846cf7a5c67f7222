//! Repositories in a bucket: `s3://`, `gs://` and `az://` URLs opened with
//! `object_store`'s builders, which read each cloud's usual environment
//! (`AWS_*`, `GOOGLE_*`, `AZURE_*`: keys, regions, endpoints, instance and
//! workload credentials). Nothing here reads, prints or stores a secret: a
//! URL carrying credentials is refused, and errors name the URL only.

use std::sync::Arc;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::ObjectStore;

/// The cloud a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Amazon S3 and S3-compatible servers (`s3://`, `s3a://`).
    S3,
    /// Google Cloud Storage (`gs://`).
    Gcs,
    /// Azure Blob Storage and Data Lake (`az://`, `azure://`, `abfs://`, `abfss://`).
    Azure,
}

impl Backend {
    /// The backend of a URL scheme, if it names one.
    pub fn of_scheme(scheme: &str) -> Option<Self> {
        match scheme {
            "s3" | "s3a" => Some(Self::S3),
            "gs" => Some(Self::Gcs),
            "az" | "azure" | "abfs" | "abfss" | "adl" => Some(Self::Azure),
            _ => None,
        }
    }
}

/// A location fit to print: a URL's user name, password and query (where
/// a careless user might put a key) are left out.
pub fn redacted(location: &str) -> String {
    match url::Url::parse(location) {
        Ok(mut url)
            if !url.username().is_empty() || url.password().is_some() || url.query().is_some() =>
        {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.set_query(None);
            url.to_string()
        }
        _ => location.to_string(),
    }
}

/// What a store's failure comes to, in one sentence. A cloud client's
/// error holds the whole exchange (the request's URL, its timing and retry
/// settings, the server's XML with request ids); this keeps the request
/// and what the server said (status, error code, message) and adds the way
/// out where the code names one. The full text stays the error's source,
/// which `tablepin --verbose` prints.
pub(crate) fn said(e: &object_store::Error) -> String {
    let full = e.to_string();
    if full.contains("169.254.169.254") {
        return "no AWS credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_REGION), or run where an instance role provides them".into();
    }
    let Some(exchange) = Exchange::parse(&full) else {
        return full;
    };
    let mut out = match &exchange.request {
        Some(request) => format!("{request} failed"),
        None => "the request failed".to_string(),
    };
    if let Some(status) = exchange.status {
        out.push_str(&format!(": the server answered {status}"));
    }
    match (exchange.code, exchange.message) {
        (Some(code), Some(message)) => out.push_str(&format!(" {code} ({message})")),
        (Some(code), None) => out.push_str(&format!(" {code}")),
        (None, _) if exchange.status.is_none() => out.push_str(&format!(": {}", exchange.rest)),
        (None, _) => {}
    }
    if let Some(fix) = exchange.code.and_then(fix_for) {
        out.push_str("; ");
        out.push_str(fix);
    }
    out
}

/// A cloud client's failed request, as its error text tells it:
/// `Error performing METHOD URL in T[, after N retries, …] - REST`, where
/// REST holds the status and the server's body.
struct Exchange<'a> {
    request: Option<&'a str>,
    status: Option<&'a str>,
    code: Option<&'a str>,
    message: Option<&'a str>,
    rest: &'a str,
}

impl<'a> Exchange<'a> {
    fn parse(full: &'a str) -> Option<Self> {
        let start = full.find("Error performing ")?;
        let performed = &full[start + "Error performing ".len()..];
        let (head, rest) = performed.split_once(" - ")?;
        let request = head.rfind(" in ").map(|at| &head[..at]);
        let status = rest
            .split_once("status code: ")
            .map(|(_, s)| s.split(':').next().unwrap_or(s).trim());
        Some(Self {
            request,
            status,
            code: between(rest, "<Code>", "</Code>"),
            message: between(rest, "<Message>", "</Message>"),
            rest: rest.lines().next().unwrap_or(rest),
        })
    }
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let from = text.find(open)? + open.len();
    let len = text[from..].find(close)?;
    Some(text[from..from + len].trim()).filter(|s| !s.is_empty())
}

/// The environment a user checks for a server's error code.
fn fix_for(code: &str) -> Option<&'static str> {
    Some(match code {
        "InvalidAccessKeyId" => "check AWS_ACCESS_KEY_ID (and AWS_SESSION_TOKEN for temporary credentials), and AWS_ENDPOINT_URL for an S3-compatible server",
        "SignatureDoesNotMatch" => "check AWS_SECRET_ACCESS_KEY: it does not belong to AWS_ACCESS_KEY_ID",
        "ExpiredToken" | "InvalidToken" => "the session has ended: renew AWS_SESSION_TOKEN with the keys it came with",
        "AccessDenied" => "these credentials may not do this here: check the bucket's policy and the role or user behind AWS_ACCESS_KEY_ID",
        "AuthenticationFailed" => "check AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY (or the SAS token)",
        "AuthorizationPermissionMismatch" | "AuthorizationFailure" => "these credentials may not do this in the container: check its role assignments",
        _ => return None,
    })
}

/// Why a remote location could not be opened (the store turns it into
/// [`crate::StoreError::Location`]).
pub(crate) type Refusal = String;

/// The object store for a bucket URL, under the URL's path as a prefix.
pub(crate) fn open(url: &url::Url, backend: Backend) -> Result<Arc<dyn ObjectStore>, Refusal> {
    if !url.username().is_empty() || url.password().is_some() || url.query().is_some() {
        return Err(
            "credentials and options do not belong in the repository URL; \
                    set them in the environment (AWS_*, GOOGLE_*, AZURE_* variables)"
                .to_string(),
        );
    }
    let store: Arc<dyn ObjectStore> = match backend {
        Backend::S3 => {
            let builder = AmazonS3Builder::from_env().with_url(url.as_str());
            if builder
                .get_config_value(&AmazonS3ConfigKey::ConditionalPut)
                .is_some_and(|v| v == "disabled")
            {
                return Err(
                    "conditional writes are disabled (AWS_CONDITIONAL_PUT=disabled): two writers \
                     could both move a branch; tablepin needs put-if-absent"
                        .to_string(),
                );
            }
            Arc::new(builder.build().map_err(|e| e.to_string())?)
        }
        Backend::Gcs => Arc::new(
            GoogleCloudStorageBuilder::from_env()
                .with_url(url.as_str())
                .build()
                .map_err(|e| e.to_string())?,
        ),
        Backend::Azure => Arc::new(
            MicrosoftAzureBuilder::from_env()
                .with_url(url.as_str())
                .build()
                .map_err(|e| e.to_string())?,
        ),
    };
    let prefix = url.path().trim_matches('/');
    if prefix.is_empty() {
        return Ok(store);
    }
    let prefix = Path::from_url_path(prefix).map_err(|e| format!("bad path in the URL: {e}"))?;
    Ok(Arc::new(PrefixStore::new(store, prefix)))
}
