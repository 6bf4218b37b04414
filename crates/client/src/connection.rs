//! One connection: send a request frame, read exactly one reply frame.

use crate::ClientError;
use bytes::{Bytes, BytesMut};
use causet_wire::{decode_frame, Frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A connection that carries one request at a time: the protocol has no request ids, so the n-th reply answers
/// the n-th request.
#[derive(Debug)]
pub(crate) struct Connection {
    stream: TcpStream,
    buffer: BytesMut,
    max_frame_bytes: usize,
    /// Set while a request awaits its reply. If it is still set when the next request starts, the previous one
    /// failed or was dropped mid-way, and a stale reply may still arrive: the connection is unusable.
    in_flight: bool,
}

impl Connection {
    pub(crate) fn new(stream: TcpStream, max_frame_bytes: usize) -> Connection {
        Connection { stream, buffer: BytesMut::with_capacity(4096), max_frame_bytes, in_flight: false }
    }

    pub(crate) fn set_max_frame_bytes(&mut self, max_frame_bytes: usize) {
        self.max_frame_bytes = max_frame_bytes;
    }

    /// Sends one request frame and waits for its reply.
    pub(crate) async fn call(&mut self, request: Bytes) -> Result<Frame, ClientError> {
        if self.in_flight {
            return Err(ClientError::Broken);
        }
        self.in_flight = true;
        self.stream.write_all(&request).await?;
        let reply = self.read_frame().await?;
        self.in_flight = false;
        Ok(reply)
    }

    async fn read_frame(&mut self) -> Result<Frame, ClientError> {
        loop {
            if let Some(frame) = decode_frame(&mut self.buffer, self.max_frame_bytes)? {
                return Ok(frame);
            }
            if self.stream.read_buf(&mut self.buffer).await? == 0 {
                return Err(ClientError::Closed);
            }
        }
    }
}
