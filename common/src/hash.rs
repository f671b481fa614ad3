//! SHA-256 digests, canonical JSON, secrets and the HMAC proof used in the broker handshake.

use hmac::{Hmac, KeyInit, Mac};
use rand::Rng;
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// JSON text with object keys sorted at every level and no insignificant whitespace, so that two
/// values that are equal as JSON produce identical bytes whatever order their keys arrived in.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical_to(value, &[], &mut out);
    out
}

/// SHA-256 of the canonical JSON form of `value`.
pub fn canonical_sha256(value: &Value) -> String {
    canonical_sha256_without(value, &[])
}

/// SHA-256 of the canonical JSON form of `value` with object members named in `skip_keys`
/// left out at every level. Streams into the hasher: no copy of the value, no intermediate text.
pub fn canonical_sha256_without(value: &Value, skip_keys: &[&str]) -> String {
    struct HashWriter(Sha256);
    impl std::fmt::Write for HashWriter {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.update(s.as_bytes());
            Ok(())
        }
    }
    let mut writer = HashWriter(Sha256::new());
    write_canonical_to(value, skip_keys, &mut writer);
    hex::encode(writer.0.finalize())
}

/// Feed the canonical JSON form of `value`, without `skip_keys`, into `hasher`: a fingerprint
/// computed a part at a time equals [`canonical_sha256_without`] of the whole.
pub fn canonical_sha256_update(value: &Value, skip_keys: &[&str], hasher: &mut Sha256) {
    struct HashWriter<'a>(&'a mut Sha256);
    impl std::fmt::Write for HashWriter<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.update(s.as_bytes());
            Ok(())
        }
    }
    write_canonical_to(value, skip_keys, &mut HashWriter(hasher));
}

fn write_canonical_to(value: &Value, skip_keys: &[&str], out: &mut impl std::fmt::Write) {
    // Writing into a hasher or a String cannot fail.
    let _ = match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map
                .keys()
                .filter(|k| !skip_keys.contains(&k.as_str()))
                .collect();
            keys.sort();
            let _ = out.write_char('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    let _ = out.write_char(',');
                }
                let _ = write!(out, "{}:", Value::String((*key).clone()));
                write_canonical_to(&map[*key], skip_keys, out);
            }
            out.write_char('}')
        }
        Value::Array(items) => {
            let _ = out.write_char('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    let _ = out.write_char(',');
                }
                write_canonical_to(item, skip_keys, out);
            }
            out.write_char(']')
        }
        other => write!(out, "{other}"),
    };
}

/// A fresh random secret: 32 bytes from the OS generator, hex encoded, prefixed with `kind` so that
/// a leaked value says what it is (and leak tests can search for it).
pub fn new_secret(kind: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{kind}_{}", hex::encode(bytes))
}

/// Constant-time equality of two byte strings.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// HMAC-SHA256 of `message` under `key`, hex encoded. The broker proves it holds its secret by
/// answering the gateway's nonce with this value, so the secret itself never crosses the socket.
pub fn hmac_hex(key: &str, message: &str) -> String {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = match Hmac::<Sha256>::new_from_slice(key.as_bytes()) {
        Ok(mac) => mac,
        Err(_) => unreachable_hmac(),
    };
    mac.update(message.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

#[cold]
fn unreachable_hmac() -> ! {
    panic!("HMAC-SHA256 rejected a key, which its definition does not allow")
}

/// How a secret the gateway hands out (a lease, an OAuth token or code) is stored:
/// HMAC-SHA256 under the server key of `stored-secret:v1:<purpose>:<secret>`, never its plain
/// SHA-256. Someone who can write the database but lacks the key cannot store the hash of a
/// secret of their own choosing (red team 27b R2); `purpose` keeps one kind of secret from
/// passing for another.
pub fn stored_secret_hash(key: &str, purpose: &str, secret: &str) -> String {
    hmac_hex(key, &format!("stored-secret:v1:{purpose}:{secret}"))
}

/// Which broker runtime a handshake proof speaks for: the session it was started for and its
/// runner generation. Bound into both proofs, so a broker proves not only that it holds a secret
/// but whose secret it is: a database writer who swaps two sessions' broker records cannot make
/// one session's gateway link accept the other's broker (red team 27, B3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerBinding<'a> {
    pub session_id: &'a str,
    pub generation: u32,
}

/// The broker's answer to the gateway's nonce. Both directions of the handshake MAC a
/// role-prefixed message, so neither side can be made to compute the other's proof; the message is
/// canonical JSON, so no session id can be made to read as another's with a different nonce.
pub fn broker_proof(secret: &str, binding: BrokerBinding<'_>, gateway_nonce: &str) -> String {
    hmac_hex(secret, &proof_message("broker", binding, gateway_nonce))
}

/// The gateway's answer to the broker's challenge.
pub fn gateway_proof(secret: &str, binding: BrokerBinding<'_>, broker_challenge: &str) -> String {
    hmac_hex(secret, &proof_message("gateway", binding, broker_challenge))
}

fn proof_message(role: &str, binding: BrokerBinding<'_>, challenge: &str) -> String {
    canonical_json(&serde_json::json!([
        "broker-link:v4",
        role,
        binding.session_id,
        binding.generation,
        challenge
    ]))
}

/// Whether `proof` is the HMAC of `message` under `key`, compared in constant time.
pub fn verify_hmac_hex(key: &str, message: &str, proof: &str) -> bool {
    constant_time_eq(hmac_hex(key, message).as_bytes(), proof.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let a = json!({"b": 1, "a": {"y": [1, {"d": 2, "c": 3}], "x": "s"}});
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"x":"s","y":[1,{"c":3,"d":2}]},"b":1}"#
        );
    }

    #[test]
    fn hmac_proof_verifies_only_with_the_right_key() {
        let proof = hmac_hex("secret", "nonce");
        assert!(verify_hmac_hex("secret", "nonce", &proof));
        assert!(!verify_hmac_hex("other", "nonce", &proof));
        assert!(!verify_hmac_hex("secret", "nonce2", &proof));
    }

    #[test]
    fn a_proof_speaks_for_one_session_generation_and_role() {
        let binding = BrokerBinding {
            session_id: "ns_a",
            generation: 1,
        };
        let proof = broker_proof("k", binding, "n");
        for other in [
            BrokerBinding {
                session_id: "ns_b",
                generation: 1,
            },
            BrokerBinding {
                session_id: "ns_a",
                generation: 2,
            },
        ] {
            assert_ne!(proof, broker_proof("k", other, "n"));
        }
        assert_ne!(proof, gateway_proof("k", binding, "n"));
        assert_ne!(proof, broker_proof("k2", binding, "n"));
        // No session id reads as another's with a shifted nonce.
        let shifted = BrokerBinding {
            session_id: "ns_a\",1,\"n",
            generation: 1,
        };
        assert_ne!(proof, broker_proof("k", shifted, ""));
    }

    #[test]
    fn sha256_matches_known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
