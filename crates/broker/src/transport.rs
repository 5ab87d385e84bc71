//! The bytes under a client connection: plain TCP, where fetched records
//! go from segment files to the socket with sendfile(2), or TLS through
//! rustls, where they are read from the file and encrypted on their way
//! (user-space TLS has no zero-copy path). Whether the kernel offers kTLS,
//! the only way to zero-copy over TLS, is probed at start and reported
//! ([`kernel_offers_ktls`]); krabka does not hand its TLS sessions to the
//! kernel, as no kernel it is tested on offers it.
//!
//! A TLS connection's handshake happens here, and with it the principal an
//! SSL listener serves the client as: its certificate's subject (as Java's
//! X500Principal names it) through `ssl.principal.mapping.rules`, or
//! ANONYMOUS when it sent none.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use krabka_log::FileSlice;
use krabka_security::KafkaPrincipal;
use tokio::io::{AsyncRead, AsyncWriteExt, Interest, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use crate::config::security::ClientListener;
use crate::config::tls::TlsListener;

/// How much of a segment a TLS connection reads at a time for a fetch.
const TLS_FILE_CHUNK: usize = 64 * 1024;

/// An accepted connection, ready to be split into its reader and writer.
pub enum Transport {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// Why a connection ended before it could be served.
pub enum AcceptError {
    /// The client went away or went quiet (not an authentication failure,
    /// as Kafka counts it).
    Closed(String),
    /// The TLS handshake failed, or the certificate names no principal.
    AuthenticationFailed(String),
}

/// Completes the listener's TLS handshake, if it has TLS, within `timeout`,
/// and names the client as the transport knows it.
pub async fn accept(
    stream: TcpStream,
    listener: &ClientListener,
    timeout: Duration,
) -> Result<(Transport, KafkaPrincipal), AcceptError> {
    let _ = stream.set_nodelay(true);
    let Some(tls) = &listener.tls else {
        return Ok((Transport::Tcp(stream), KafkaPrincipal::anonymous()));
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.server_config());
    let handshake = tokio::time::timeout(timeout, acceptor.accept(stream)).await;
    let stream = handshake.map_err(|_| AcceptError::Closed("TLS handshake timed out".into()))?;
    let stream = stream.map_err(|e| match e.kind() {
        io::ErrorKind::InvalidData => AcceptError::AuthenticationFailed(format!("TLS handshake failed: {e}")),
        _ => AcceptError::Closed(format!("TLS handshake: {e}")),
    })?;
    let principal = if listener.sasl.is_some() {
        KafkaPrincipal::anonymous() // SASL names the client
    } else {
        certificate_principal(tls, stream.get_ref().1.peer_certificates()).map_err(AcceptError::AuthenticationFailed)?
    };
    Ok((Transport::Tls(Box::new(stream)), principal))
}

/// Whether the kernel offers kTLS: the `tls` upper-layer protocol on a
/// TCP socket (a loopback connection made for the probe), as an
/// application must ask for it before handing it a TLS session's keys.
pub fn kernel_offers_ktls() -> bool {
    let probe = || -> io::Result<bool> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let stream = std::net::TcpStream::connect(listener.local_addr()?)?;
        let ulp = b"tls";
        // SAFETY: a valid socket and a buffer of the length given.
        let set = unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_ULP,
                ulp.as_ptr().cast(),
                ulp.len() as libc::socklen_t,
            )
        };
        Ok(set == 0)
    };
    probe().unwrap_or(false)
}

/// An SSL client's principal: `User:` and its certificate subject mapped
/// by the listener's rules; ANONYMOUS without a certificate. A subject no
/// rule maps fails the authentication, as in Kafka.
fn certificate_principal(
    tls: &TlsListener,
    certificates: Option<&[rustls::pki_types::CertificateDer<'_>]>,
) -> Result<KafkaPrincipal, String> {
    let Some(leaf) = certificates.and_then(|c| c.first()) else {
        return Ok(KafkaPrincipal::anonymous());
    };
    let subject = krabka_security::x509::subject_name(leaf).map_err(|e| format!("client certificate: {e}"))?;
    let name = tls.principal_mapper.name(&subject).map_err(|e| e.to_string())?;
    Ok(KafkaPrincipal::user(&name))
}

impl Transport {
    pub fn split(self) -> (RequestReader, ResponseWriter) {
        match self {
            Transport::Tcp(stream) => {
                let (reader, writer) = stream.into_split();
                (RequestReader::Tcp(reader), ResponseWriter::Tcp(writer))
            }
            Transport::Tls(stream) => {
                let (reader, writer) = tokio::io::split(*stream);
                (RequestReader::Tls(reader), ResponseWriter::Tls(writer))
            }
        }
    }
}

/// The connection's read side.
pub enum RequestReader {
    Tcp(OwnedReadHalf),
    Tls(ReadHalf<TlsStream<TcpStream>>),
}

impl AsyncRead for RequestReader {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            RequestReader::Tcp(reader) => Pin::new(reader).poll_read(cx, buf),
            RequestReader::Tls(reader) => Pin::new(reader).poll_read(cx, buf),
        }
    }
}

/// The connection's write side.
pub enum ResponseWriter {
    Tcp(OwnedWriteHalf),
    Tls(WriteHalf<TlsStream<TcpStream>>),
}

impl ResponseWriter {
    pub async fn write_bytes(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            ResponseWriter::Tcp(writer) => writer.write_all(bytes).await,
            ResponseWriter::Tls(writer) => writer.write_all(bytes).await,
        }
    }

    /// Sends `slice` of a segment file: sendfile(2) on TCP, read and
    /// encrypted a chunk at a time on TLS.
    pub async fn write_file(&mut self, slice: &FileSlice) -> io::Result<()> {
        match self {
            ResponseWriter::Tcp(writer) => send_file(writer, slice).await,
            ResponseWriter::Tls(writer) => {
                let mut buf = vec![0; TLS_FILE_CHUNK.min(slice.length as usize)];
                let (mut position, end) = (slice.position, slice.position + u64::from(slice.length));
                while position < end {
                    let len = buf.len().min((end - position) as usize);
                    // The segment is in the page cache (it was just
                    // written or read); a blocking read is brief.
                    slice
                        .file
                        .read_exact_at(&mut buf[..len], position)
                        .map_err(|e| io::Error::new(e.kind(), format!("segment file shorter than planned: {e}")))?;
                    writer.write_all(&buf[..len]).await?;
                    position += len as u64;
                }
                Ok(())
            }
        }
    }

    /// Pushes out what TLS holds of the response so far.
    pub async fn flush(&mut self) -> io::Result<()> {
        match self {
            ResponseWriter::Tcp(_) => Ok(()),
            ResponseWriter::Tls(writer) => writer.flush().await,
        }
    }

    pub async fn shutdown(&mut self) -> io::Result<()> {
        match self {
            ResponseWriter::Tcp(writer) => writer.shutdown().await,
            ResponseWriter::Tls(writer) => writer.shutdown().await,
        }
    }
}

/// Sends `slice` from its segment file with sendfile(2), waiting for the
/// socket to drain when it is full.
async fn send_file(writer: &OwnedWriteHalf, slice: &FileSlice) -> io::Result<()> {
    let stream: &TcpStream = writer.as_ref();
    let socket_fd = stream.as_raw_fd();
    let file_fd = slice.file.as_raw_fd();
    let mut offset = slice.position as libc::off_t;
    let end = slice.position + u64::from(slice.length);
    while (offset as u64) < end {
        stream.writable().await?;
        let remaining = (end - offset as u64) as usize;
        let sent = stream.try_io(Interest::WRITABLE, || {
            // SAFETY: both descriptors are open for the duration of the call
            // (the FileSlice holds its file; the stream is borrowed) and
            // `offset` is a valid out-parameter.
            let n = unsafe { libc::sendfile(socket_fd, file_fd, &mut offset, remaining) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match sent {
            // The file ended early: it was truncated after the read was
            // planned. The frame's length is already promised; close.
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "segment file shorter than planned")),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
