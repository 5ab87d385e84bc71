//! One Kafka connection to another node's controller listener: requests
//! written one at a time, each response read back and checked against its
//! correlation id, every exchange bounded by a timeout. The raft peers and
//! the broker's registration with the active controller both talk through
//! it.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use krabka_protocol::frame::{encode_request, encode_request_body, parse_response_header};
use krabka_protocol::{ApiKey, Message, RequestBody, ResponseBody};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::config::security::ControllerClient;

/// The channel's bytes: TCP, or TLS over it.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<S: AsyncRead + AsyncWrite + Unpin + Send> Stream for S {}

/// A response frame larger than this is a peer gone wrong.
const MAX_RESPONSE_BYTES: usize = 64 << 20;

pub struct Channel {
    stream: Box<dyn Stream>,
    correlation_id: i32,
    timeout: Duration,
    client_id: String,
}

impl Channel {
    /// Connects to `host:port` within `timeout`, which then bounds each exchange.
    pub async fn connect(host: &str, port: u16, timeout_after: Duration, client_id: String) -> Result<Self, String> {
        let connect = timeout(timeout_after, TcpStream::connect((host, port))).await;
        let stream = connect.map_err(|_| "connect timed out".to_string())?.map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        Ok(Channel { stream: Box::new(stream), correlation_id: 0, timeout: timeout_after, client_id })
    }

    /// Connects to the controller listener at `host:port` as `client`
    /// says: over TLS, then logged in over SASL, when its protocol has them.
    pub async fn connect_to_controller(
        host: &str,
        port: u16,
        timeout_after: Duration,
        client_id: String,
        client: &ControllerClient,
    ) -> Result<Self, String> {
        let mut channel = Self::connect(host, port, timeout_after, client_id).await?;
        if let Some(tls) = &client.tls {
            channel = channel.start_tls(tls.get(), host).await?;
        }
        if let Some(login) = &client.login {
            channel.authenticate(login.mechanism, &login.username, &login.password).await?;
        }
        Ok(channel)
    }

    /// Makes the channel a TLS client of `host` (checked against the
    /// certificate, as Kafka's `ssl.endpoint.identification.algorithm=https`).
    pub async fn start_tls(mut self, config: std::sync::Arc<rustls::ClientConfig>, host: &str) -> Result<Self, String> {
        let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| format!("{host}: {e}"))?;
        let connector = tokio_rustls::TlsConnector::from(config);
        let handshake = timeout(self.timeout, connector.connect(name, self.stream));
        let stream = handshake.await.map_err(|_| "TLS handshake timed out".to_string())?;
        self.stream = Box::new(stream.map_err(|e| format!("TLS handshake failed: {e}"))?);
        Ok(self)
    }

    /// Logs in over SASL as `username` (SaslHandshake v1, then
    /// SaslAuthenticate v2 until the mechanism completes), as a Kafka
    /// broker does on a SASL inter-broker listener.
    pub async fn authenticate(
        &mut self,
        mechanism: krabka_security::SaslMechanism,
        username: &str,
        password: &str,
    ) -> Result<(), String> {
        use krabka_protocol::{SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest};
        let handshake = SaslHandshakeRequest { mechanism: mechanism.name().into(), ..Default::default() };
        let answer: krabka_protocol::SaslHandshakeResponse = self.call(ApiKey::SaslHandshake, 1, &handshake).await?;
        if answer.error_code != 0 {
            return Err(format!("SaslHandshake {} refused ({})", mechanism.name(), answer.error_code));
        }
        let nonce = krabka_security::SaslServer::random_nonce();
        let mut client = krabka_security::SaslClient::new(mechanism, username, password, nonce);
        let mut token = client.initial_token();
        loop {
            let request = SaslAuthenticateRequest { auth_bytes: Bytes::from(token), ..Default::default() };
            let answer: SaslAuthenticateResponse = self.call(ApiKey::SaslAuthenticate, 2, &request).await?;
            if answer.error_code != 0 {
                return Err(format!("authentication failed: {}", answer.error_message.unwrap_or_default()));
            }
            match client.evaluate(&answer.auth_bytes).map_err(|e| e.0)? {
                Some(next) => token = next,
                None => return Ok(()),
            }
        }
    }

    /// Sends `body` (an `M`) at `version` and decodes its answer as an `R`.
    pub async fn call<M: Message, R: Message>(&mut self, key: ApiKey, version: i16, body: &M) -> Result<R, String> {
        let correlation_id = self.next_correlation_id();
        let mut frame = BytesMut::new();
        encode_request(&mut frame, key, version, correlation_id, Some(&self.client_id), body)
            .map_err(|e| e.to_string())?;
        let mut response = self.round_trip(&frame, key, version, correlation_id).await?;
        R::decode(&mut response, version).map_err(|e| e.to_string())
    }

    /// Sends any request body at `version`; its response.
    pub async fn call_body(&mut self, key: ApiKey, version: i16, body: &RequestBody) -> Result<ResponseBody, String> {
        let correlation_id = self.next_correlation_id();
        let mut frame = BytesMut::new();
        encode_request_body(&mut frame, version, correlation_id, Some(&self.client_id), body)
            .map_err(|e| e.to_string())?;
        let mut response = self.round_trip(&frame, key, version, correlation_id).await?;
        ResponseBody::decode(key, version, &mut response).map_err(|e| e.to_string())
    }

    fn next_correlation_id(&mut self) -> i32 {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        self.correlation_id
    }

    /// Writes one request frame and reads its response's body.
    async fn round_trip(
        &mut self,
        frame: &[u8],
        key: ApiKey,
        version: i16,
        correlation_id: i32,
    ) -> Result<Bytes, String> {
        let exchange = async {
            self.stream.write_all(frame).await?;
            self.stream.flush().await?;
            let size = self.stream.read_i32().await?;
            let size = usize::try_from(size).ok().filter(|&s| s <= MAX_RESPONSE_BYTES);
            let size = size.ok_or_else(|| std::io::Error::other("bad response size"))?;
            let mut body = vec![0u8; size];
            self.stream.read_exact(&mut body).await?;
            Ok::<_, std::io::Error>(Bytes::from(body))
        };
        let mut body = timeout(self.timeout, exchange)
            .await
            .map_err(|_| "request timed out".to_string())?
            .map_err(|e| e.to_string())?;
        let header = parse_response_header(key, version, &mut body).map_err(|e| e.to_string())?;
        if header.correlation_id != correlation_id {
            return Err(format!("correlation id {} answers {correlation_id}", header.correlation_id));
        }
        Ok(body)
    }
}
