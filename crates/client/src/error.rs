//! The client's error.

use causet_wire::response::error_code_name;
use causet_wire::{EncodeError, FrameError, ProtocolError};

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server refused or failed the request: an `ApbErrorResp`, or a typed response with `success = false`.
    #[error("server error {code} ({}): {message}", error_code_name(*.code))]
    Server {
        /// AntidoteDB's error code: 0 unknown, 1 timeout, 2 no_permissions, 3 aborted.
        code: u32,
        /// The server's message (for a typed failure, which carries none, a description of the request).
        message: String,
    },
    /// The request cannot be expressed in the protocol (nothing was sent).
    #[error("cannot encode the request: {0}")]
    Encode(#[from] EncodeError),
    /// The reply is not a valid answer to the request. The connection stays usable.
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtocolError),
    /// The server's byte stream is not valid framing. The connection is unusable afterwards.
    #[error("framing error: {0}")]
    Frame(#[from] FrameError),
    /// The socket failed. The connection is unusable afterwards.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The server closed the connection before answering. The connection is unusable afterwards.
    #[error("the server closed the connection")]
    Closed,
    /// An earlier request on this connection failed mid-way (I/O or framing error, closed connection, or a request
    /// future dropped before its reply arrived), so replies can no longer be matched to requests. Reconnect.
    #[error("the connection is unusable after an earlier request failed mid-way; reconnect")]
    Broken,
}

impl ClientError {
    /// AntidoteDB's error code, for errors the server reported.
    pub fn code(&self) -> Option<u32> {
        match self {
            ClientError::Server { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the server reported the transaction aborted (code 3): retrying the transaction may succeed.
    pub fn is_aborted(&self) -> bool {
        self.code() == Some(causet_wire::response::ERROR_ABORTED)
    }

    /// Whether the server reported a timeout (code 1).
    pub fn is_timeout(&self) -> bool {
        self.code() == Some(causet_wire::response::ERROR_TIMEOUT)
    }

    /// Whether the connection can no longer be used and the caller must reconnect.
    pub fn is_connection_lost(&self) -> bool {
        matches!(self, ClientError::Frame(_) | ClientError::Io(_) | ClientError::Closed | ClientError::Broken)
    }
}
