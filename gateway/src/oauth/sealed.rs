//! Values the gateway hands out and takes back unchanged instead of storing them (issue 24 item
//! 1): `prefix` + base64url(`version` ‖ `payload` ‖ HMAC-SHA256(`label` ‖ `version` ‖ `payload`))
//! under the server key. Opening checks the length, then the MAC in constant time, and only then
//! hands out the version and the payload, so only bytes this gateway sealed are ever decoded.
//! Client ids (`client_id.rs`) and consent requests (`request_id.rs`) are sealed; each has its own
//! label, so a value of one kind never opens as the other.

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Bytes of the MAC.
const MAC_BYTES: usize = 32;

/// Why a sealed value does not open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealError {
    /// Longer than any value of its kind.
    Oversized,
    /// Not of the form (prefix, base64url, long enough): cut short or not one of ours.
    Malformed,
    /// The MAC does not verify: altered, or sealed under another key or for another kind.
    Forged,
}

/// HMAC-SHA256 of `label` ‖ `data` under `key`.
pub fn keyed_mac(key: &[u8], label: &[u8], data: &[u8]) -> [u8; MAC_BYTES] {
    let mut mac = start(key, label);
    mac.update(data);
    mac.finalize().into_bytes().into()
}

fn start(key: &[u8], label: &[u8]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC-SHA256 accepts keys of any length"));
    mac.update(label);
    mac
}

/// Seals and opens values of one kind under the server key.
pub struct Sealer {
    key: Vec<u8>,
    /// What the MAC covers first: no other MAC under the server key starts with it.
    label: &'static [u8],
    prefix: &'static str,
    max_len: usize,
}

impl Sealer {
    pub fn new(
        server_key: &str,
        label: &'static [u8],
        prefix: &'static str,
        max_len: usize,
    ) -> Sealer {
        Sealer {
            key: server_key.as_bytes().to_vec(),
            label,
            prefix,
            max_len,
        }
    }

    /// `payload` sealed in encoding `version`.
    pub fn seal(&self, version: u8, payload: &[u8]) -> String {
        let mut bytes = Vec::with_capacity(1 + payload.len() + MAC_BYTES);
        bytes.push(version);
        bytes.extend_from_slice(payload);
        let tag = keyed_mac(&self.key, self.label, &bytes);
        bytes.extend_from_slice(&tag);
        format!(
            "{}{}",
            self.prefix,
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
        )
    }

    /// The version and payload of `value`, if this gateway sealed it unchanged: the length first,
    /// then the MAC (constant time); the payload is not looked at before.
    pub fn open(&self, value: &str) -> Result<(u8, Vec<u8>), SealError> {
        if value.len() > self.max_len {
            return Err(SealError::Oversized);
        }
        let encoded = value
            .strip_prefix(self.prefix)
            .ok_or(SealError::Malformed)?;
        let mut bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| SealError::Malformed)?;
        if bytes.len() < 1 + MAC_BYTES + 2 {
            return Err(SealError::Malformed);
        }
        let tag = bytes.split_off(bytes.len() - MAC_BYTES);
        let mut mac = start(&self.key, self.label);
        mac.update(&bytes);
        mac.verify_slice(&tag).map_err(|_| SealError::Forged)?;
        let payload = bytes.split_off(1);
        Ok((bytes[0], payload))
    }
}
