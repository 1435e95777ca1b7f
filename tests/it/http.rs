//! The HTTP/1.1 request reader both local stand-ins (Ollama, Discord) share: enough of the
//! protocol for reqwest's keep-alive requests with a `Content-Length` JSON body.

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// One request as a stand-in sees it.
pub struct Request {
    pub method: String,
    /// The request target as sent (path and query).
    pub target: String,
    /// Lower-case names, trimmed values.
    pub headers: Vec<(String, String)>,
    /// The JSON body, or `Null` when there is none or it does not parse.
    pub body: Value,
}

/// A request a stand-in kept for the test to inspect.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// The path the stand-in routed on (Discord's without `/api/v10` and the query string).
    pub path: String,
    pub body: Value,
    /// Lower-case names, in the order sent.
    pub headers: Vec<(String, String)>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Reads the next request on a kept-alive connection; `None` when the client closed it.
pub async fn read_request<R: AsyncBufRead + Unpin>(reader: &mut R) -> std::io::Result<Option<Request>> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).await? == 0 {
        return Ok(None);
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let mut content_length = 0usize;
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).await?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                content_length = value.trim().parse().unwrap_or(0);
            }
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let mut body = vec![0u8; content_length];
    reader.read_exact(&mut body).await?;
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Ok(Some(Request { method, target, headers, body }))
}
