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
}

/// The framing codec both sides use on the socket.
pub fn frame_codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME_BYTES)
        .new_codec()
}

/// Encode one message as a frame body.
pub fn encode<T: Serialize>(message: &T) -> Result<Bytes, CodecError> {
    Ok(Bytes::from(serde_json::to_vec(message)?))
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
}
