//! Fetching an OAUTHBEARER listener's JSON Web Key Set from its `http:` or
//! `https:` endpoint (KIP-768's `sasl.oauthbearer.jwks.endpoint.url`), as
//! Kafka's RefreshingHttpsJwks keeps it: at start, then every
//! `sasl.oauthbearer.jwks.endpoint.refresh.ms`; a failed fetch is retried
//! (after 10 s, up to the refresh interval) and the keys fetched last stay
//! in use. One HTTP/1.1 GET per fetch, the body read to the end of the
//! connection or as its chunks say.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::config::oauthbearer::FetchedJwks;

/// The most a JWKS response may hold.
const MAX_RESPONSE_BYTES: u64 = 4 << 20;
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
const RETRY_AFTER: Duration = Duration::from_secs(10);

/// Keeps `jwks` fresh until shutdown.
pub async fn keep_fresh(jwks: Arc<FetchedJwks>, mut shutdown: watch::Receiver<bool>) {
    loop {
        let fetched = tokio::time::timeout(FETCH_TIMEOUT, fetch(&jwks.url, jwks.roots.clone())).await;
        let outcome = match fetched {
            Ok(Ok(document)) => jwks.install(&document),
            Ok(Err(e)) => Err(e),
            Err(_) => Err("timed out".to_string()),
        };
        let wait = match outcome {
            Ok(keys) => {
                tracing::info!(url = %jwks.url, keys, "fetched the OAUTHBEARER JWKS");
                Duration::from_millis(jwks.refresh_ms)
            }
            Err(error) => {
                tracing::warn!(url = %jwks.url, %error, "cannot fetch the OAUTHBEARER JWKS; the keys fetched last stay");
                RETRY_AFTER.min(Duration::from_millis(jwks.refresh_ms))
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

/// GETs `url` (`http://host[:port]/path` or `https://...`, the latter
/// checked against `roots`) and answers the body of a 200 response.
pub async fn fetch(url: &str, roots: Option<Arc<rustls::RootCertStore>>) -> Result<String, String> {
    let (tls, rest) = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
        (Some(rest), _) => (true, rest),
        (None, Some(rest)) => (false, rest),
        _ => return Err(format!("{url} is not an http: or https: URL")),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let host = authority.rsplit_once(':').map_or(authority, |(host, _)| host).trim_matches(['[', ']']);
    let address = if authority.contains(':') && !authority.ends_with(']') {
        authority.to_string()
    } else {
        format!("{authority}:{}", if tls { 443 } else { 80 })
    };
    let stream = TcpStream::connect(&address).await.map_err(|e| format!("cannot connect to {address}: {e}"))?;
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\nConnection: close\r\n\r\n");
    let response = if tls {
        let roots = roots.ok_or("no CA certificates to check the endpoint with")?;
        let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let stream = connector.connect(name, stream).await.map_err(|e| format!("TLS with {authority}: {e}"))?;
        exchange(stream, &request).await?
    } else {
        exchange(stream, &request).await?
    };
    body_of(&response)
}

/// Sends `request` and reads the whole response.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, request: &str) -> Result<Vec<u8>, String> {
    stream.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    let read = stream.take(MAX_RESPONSE_BYTES).read_to_end(&mut response).await;
    // A TLS peer that closes without close_notify still sent what it sent.
    if let Err(e) = read {
        if response.is_empty() {
            return Err(e.to_string());
        }
    }
    Ok(response)
}

/// The body of an HTTP/1.1 200 response (`Content-Length`, chunked, or
/// up to the end of the connection).
fn body_of(response: &[u8]) -> Result<String, String> {
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").ok_or("no complete HTTP response")?;
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let mut body = &response[split + 4..];
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(format!("the endpoint answered {status:?}"));
    }
    let header = |name: &str| {
        head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_ascii_lowercase())
        })
    };
    let decoded;
    if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        decoded = dechunk(body)?;
        body = &decoded;
    } else if let Some(length) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body = body.get(..length).ok_or("the response is shorter than its Content-Length")?;
    }
    String::from_utf8(body.to_vec()).map_err(|_| "the JWKS is not UTF-8".to_string())
}

/// A chunked body's data.
fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut data = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n").ok_or("a chunk without its size line")?;
        let size_text = String::from_utf8_lossy(&body[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or_default().trim().to_string();
        let size = usize::from_str_radix(&size_text, 16).map_err(|_| format!("bad chunk size {size_text:?}"))?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(data);
        }
        data.extend_from_slice(body.get(..size).ok_or("a chunk cut short")?);
        body = body.get(size + 2..).ok_or("a chunk cut short")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_read_as_http_frames_them() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"keys\":[]}";
        assert_eq!(body_of(plain).as_deref(), Ok("{\"keys\":[]}"));
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"ke\r\n7;x=y\r\nys\":[]}\r\n0\r\n\r\n";
        assert_eq!(body_of(chunked).as_deref(), Ok("{\"keys\":[]}"));
        let to_the_end = b"HTTP/1.0 200 OK\r\n\r\n{}";
        assert_eq!(body_of(to_the_end).as_deref(), Ok("{}"));
        assert!(body_of(b"HTTP/1.1 404 Not Found\r\n\r\n").unwrap_err().contains("404"));
        assert!(body_of(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}").is_err());
        assert!(body_of(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err());
        assert!(body_of(b"garbage").is_err());
    }
}
