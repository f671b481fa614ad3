//! The only place wire messages become bytes: length-delimited frames of JSON text.

use bytes::{Bytes, BytesMut};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::codec::LengthDelimitedCodec;

/// Largest frame either side accepts. A reply is at most 768 KiB before JSON escaping, which
/// can grow control characters sixfold; 16 MiB leaves room for that and for tool outputs.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// Errors turning frames into messages.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("frame is not valid JSON for this message type: {0}")]
    Decode(#[from] serde_json::Error),
    /// Refused before it reaches the socket: the peer would drop the link on it.
    #[error("a message of {bytes} bytes is over the link's frame limit of {MAX_FRAME_BYTES}")]
    TooLarge { bytes: usize },
}

/// The framing codec both sides use on the socket.
pub fn frame_codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME_BYTES)
        .new_codec()
}

/// Encode one message as a frame body; one over [`MAX_FRAME_BYTES`] is an error, so every
/// writer sees it before the socket does.
pub fn encode<T: Serialize>(message: &T) -> Result<Bytes, CodecError> {
    let bytes = serde_json::to_vec(message)?;
    if bytes.len() > MAX_FRAME_BYTES {
        return Err(CodecError::TooLarge { bytes: bytes.len() });
    }
    Ok(Bytes::from(bytes))
}

/// Whether `message` fits in one frame (checked where a message is made from outside input,
/// so a link never meets one it cannot carry).
pub fn fits<T: Serialize>(message: &T) -> bool {
    encode(message).is_ok()
}

/// Decode one frame body.
pub fn decode<T: DeserializeOwned>(frame: &BytesMut) -> Result<T, CodecError> {
    Ok(serde_json::from_slice(frame)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::GatewayToBroker;

    #[test]
    fn round_trip() {
        let msg = GatewayToBroker::Stop {
            reason: "owner".into(),
        };
        let bytes = encode(&msg).unwrap();
        let back: GatewayToBroker = decode(&BytesMut::from(&bytes[..])).unwrap();
        assert_eq!(back, msg);
    }

    #[test]
    fn a_message_over_the_frame_limit_is_refused_before_the_socket() {
        // Quotes double when escaped: under the limit as text, over it as a frame.
        let msg = GatewayToBroker::Stop {
            reason: "\"".repeat(MAX_FRAME_BYTES / 2 + 1),
        };
        assert!(
            matches!(encode(&msg), Err(CodecError::TooLarge { bytes }) if bytes > MAX_FRAME_BYTES)
        );
    }
}
