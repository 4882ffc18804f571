//! The keys upstream tokens are sealed with: AES-256-GCM (`ring::aead`), a random
//! 96-bit nonce per seal, and the record's logical key as additional authenticated
//! data, so a sealed value copied under another caller's name does not open.
//!
//! Sealed format (all of it stored, none of it secret):
//!
//! ```text
//! [version: 1 byte = 1][key id: 4 bytes][nonce: 12 bytes][ciphertext][tag: 16 bytes]
//! ```
//!
//! The key id is the first 4 bytes of the SHA-256 of the key: it picks the key that
//! opens a value without trying every one. Rotation: put the new key first (it seals)
//! and keep the old ones after it (they still open) until every value was re-sealed
//! ([`Keyring::needs_reseal`] tells which ones; the store re-seals them as they are
//! read), then drop the old keys.

use base64::Engine;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use sha2::{Digest, Sha256};
use toolgate_adapters::Secret;

/// The sealed format's first byte.
const VERSION: u8 = 1;
const KEY_ID_LEN: usize = 4;
const TAG_LEN: usize = 16;
const HEADER_LEN: usize = 1 + KEY_ID_LEN + NONCE_LEN;
/// A key is 32 bytes (AES-256).
const KEY_LEN: usize = 32;
/// More keys than this is a rotation that was never finished.
pub const MAX_KEYS: usize = 16;

/// Why a sealed value did not open. Never carries the value or the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Too short, or not of a version this gateway writes.
    #[error("not a sealed value of a known format")]
    Malformed,
    /// Sealed with a key the keyring does not hold (removed too early, or another
    /// gateway's keys).
    #[error("sealed with a key this gateway does not hold")]
    UnknownKey,
    /// The key is known but the value does not authenticate: changed, truncated, or
    /// stored under another record's name.
    #[error("does not authenticate (changed, or stored under another name)")]
    Rejected,
}

/// The system's random source failed, so nothing can be sealed (a nonce must never
/// be guessed or repeated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the system's random source failed; nothing can be sealed")]
pub struct SealError;

struct Key {
    id: [u8; KEY_ID_LEN],
    key: LessSafeKey,
}

/// The sealing key and the keys that still open older values.
pub struct Keyring {
    /// Never empty; the first seals.
    keys: Vec<Key>,
    rng: SystemRandom,
    ephemeral: bool,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("keys", &self.keys.len())
            .field("ephemeral", &self.ephemeral)
            .finish()
    }
}

impl Keyring {
    /// A keyring of configured keys, each 32 bytes in standard or URL-safe base64
    /// (padded or not; e.g. `openssl rand -base64 32`). The first seals; every one
    /// opens. Errors name a key by its position, never by its value.
    pub fn new(keys: &[Secret]) -> Result<Keyring, String> {
        if keys.is_empty() {
            return Err("at least one token encryption key is required".to_owned());
        }
        if keys.len() > MAX_KEYS {
            return Err(format!(
                "at most {MAX_KEYS} token encryption keys: drop the old ones once every token \
                 was re-sealed with the first"
            ));
        }
        let mut ring = Vec::with_capacity(keys.len());
        for (n, key) in keys.iter().enumerate() {
            let bytes = decode_key(key.expose()).ok_or_else(|| {
                format!(
                    "token encryption key {} of {} is not 32 bytes in standard or URL-safe \
                     base64 (make one with `openssl rand -base64 32`)",
                    n + 1,
                    keys.len()
                )
            })?;
            ring.push(Key::new(&bytes)?);
        }
        Ok(Keyring {
            keys: ring,
            rng: SystemRandom::new(),
            ephemeral: false,
        })
    }

    /// A keyring of one random key, for a process without configured keys: what it
    /// seals does not open in any other process, so tokens do not outlive this one
    /// (only right for the memory backend).
    pub fn ephemeral() -> Result<Keyring, SealError> {
        let rng = SystemRandom::new();
        let mut bytes = [0u8; KEY_LEN];
        rng.fill(&mut bytes).map_err(|_| SealError)?;
        let key = Key::new(&bytes).map_err(|_| SealError)?;
        Ok(Keyring {
            keys: vec![key],
            rng,
            ephemeral: true,
        })
    }

    /// Whether this keyring's key was made up by [`Keyring::ephemeral`].
    pub fn is_ephemeral(&self) -> bool {
        self.ephemeral
    }

    /// `plaintext` sealed with the first key, bound to `aad`.
    pub fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>, SealError> {
        let sealer = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).map_err(|_| SealError)?;
        let mut out = Vec::with_capacity(HEADER_LEN + plaintext.len() + TAG_LEN);
        out.push(VERSION);
        out.extend_from_slice(&sealer.id);
        out.extend_from_slice(&nonce);
        let mut body = plaintext.to_vec();
        sealer
            .key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut body,
            )
            .map_err(|_| SealError)?;
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// The plaintext of `sealed`, if one of the keys sealed it with this `aad`.
    pub fn open(&self, aad: &[u8], sealed: &[u8]) -> Result<Vec<u8>, OpenError> {
        let Parts { id, nonce, body } = split(sealed)?;
        let mut known = false;
        // Two keys can share an id (4 bytes of a digest): try each that has it.
        for key in self.keys.iter().filter(|k| k.id == id) {
            known = true;
            let mut in_out = body.to_vec();
            if let Ok(plain) = key.key.open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut in_out,
            ) {
                let len = plain.len();
                in_out.truncate(len);
                return Ok(in_out);
            }
        }
        Err(if known {
            OpenError::Rejected
        } else {
            OpenError::UnknownKey
        })
    }

    /// Whether `sealed` was sealed with a key other than the first (a rotation is
    /// under way): re-seal it. `false` for what is not a sealed value at all.
    pub fn needs_reseal(&self, sealed: &[u8]) -> bool {
        split(sealed).is_ok_and(|parts| parts.id != self.keys[0].id)
    }
}

impl Key {
    fn new(bytes: &[u8]) -> Result<Key, String> {
        let unbound = UnboundKey::new(&AES_256_GCM, bytes)
            .map_err(|_| "a token encryption key must be 32 bytes".to_owned())?;
        let digest = Sha256::digest(bytes);
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&digest[..KEY_ID_LEN]);
        Ok(Key {
            id,
            key: LessSafeKey::new(unbound),
        })
    }
}

/// The parts of a sealed value.
struct Parts<'a> {
    id: [u8; KEY_ID_LEN],
    nonce: [u8; NONCE_LEN],
    /// Ciphertext and tag.
    body: &'a [u8],
}

fn split(sealed: &[u8]) -> Result<Parts<'_>, OpenError> {
    if sealed.len() < HEADER_LEN + TAG_LEN || sealed[0] != VERSION {
        return Err(OpenError::Malformed);
    }
    let mut parts = Parts {
        id: [0; KEY_ID_LEN],
        nonce: [0; NONCE_LEN],
        body: &sealed[HEADER_LEN..],
    };
    parts.id.copy_from_slice(&sealed[1..1 + KEY_ID_LEN]);
    parts
        .nonce
        .copy_from_slice(&sealed[1 + KEY_ID_LEN..HEADER_LEN]);
    Ok(parts)
}

/// 32 bytes from standard or URL-safe base64, padded or not (surrounding blanks, as
/// a file or an environment variable may leave, ignored).
fn decode_key(text: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let text = text.trim().trim_end_matches('=');
    let bytes = STANDARD_NO_PAD
        .decode(text)
        .or_else(|_| URL_SAFE_NO_PAD.decode(text))
        .ok()?;
    (bytes.len() == KEY_LEN).then_some(bytes)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A configured key (standard base64) made of `byte`.
    pub(crate) fn key(byte: u8) -> Secret {
        Secret::from(base64::engine::general_purpose::STANDARD.encode([byte; KEY_LEN]))
    }

    #[test]
    fn seals_and_opens_with_the_same_aad() {
        let ring = Keyring::new(&[key(1)]).unwrap();
        let sealed = ring.seal(b"tokens:a", b"the token").unwrap();
        assert_eq!(sealed.len(), HEADER_LEN + 9 + TAG_LEN);
        assert!(!sealed.windows(9).any(|w| w == b"the token"));
        assert_eq!(ring.open(b"tokens:a", &sealed).unwrap(), b"the token");
        let again = ring.seal(b"tokens:a", b"the token").unwrap();
        assert_ne!(sealed, again, "every seal has its own nonce");
        assert_eq!(
            ring.open(b"tokens:a", &ring.seal(b"", b"").unwrap()),
            Err(OpenError::Rejected)
        );
        assert_eq!(ring.open(b"", &ring.seal(b"", b"").unwrap()).unwrap(), b"");
        assert!(!ring.needs_reseal(&sealed));
    }

    #[test]
    fn wrong_aad_tampering_truncation_and_unknown_keys_do_not_open() {
        let ring = Keyring::new(&[key(1)]).unwrap();
        let sealed = ring.seal(b"tokens:a", b"the token").unwrap();
        assert_eq!(ring.open(b"tokens:b", &sealed), Err(OpenError::Rejected));
        for i in 0..sealed.len() {
            let mut tampered = sealed.clone();
            tampered[i] ^= 0x01;
            let expected = match i {
                0 => OpenError::Malformed,
                1..=4 => OpenError::UnknownKey,
                _ => OpenError::Rejected,
            };
            assert_eq!(ring.open(b"tokens:a", &tampered), Err(expected), "byte {i}");
        }
        for len in 0..sealed.len() {
            let expected = if len < HEADER_LEN + TAG_LEN {
                OpenError::Malformed
            } else {
                OpenError::Rejected
            };
            assert_eq!(
                ring.open(b"tokens:a", &sealed[..len]),
                Err(expected),
                "{len} bytes"
            );
        }
        let mut longer = sealed.clone();
        longer.push(0);
        assert_eq!(ring.open(b"tokens:a", &longer), Err(OpenError::Rejected));
        let other = Keyring::new(&[key(2)]).unwrap();
        assert_eq!(other.open(b"tokens:a", &sealed), Err(OpenError::UnknownKey));
        assert!(!ring.needs_reseal(b"junk"));
    }

    #[test]
    fn rotation_opens_old_values_and_asks_for_a_reseal() {
        let old = Keyring::new(&[key(1)]).unwrap();
        let sealed = old.seal(b"aad", b"v").unwrap();
        let rotated = Keyring::new(&[key(2), key(1)]).unwrap();
        assert_eq!(rotated.open(b"aad", &sealed).unwrap(), b"v");
        assert!(rotated.needs_reseal(&sealed));
        let resealed = rotated.seal(b"aad", b"v").unwrap();
        assert!(!rotated.needs_reseal(&resealed));
        let new_only = Keyring::new(&[key(2)]).unwrap();
        assert_eq!(new_only.open(b"aad", &resealed).unwrap(), b"v");
        assert_eq!(new_only.open(b"aad", &sealed), Err(OpenError::UnknownKey));
    }

    #[test]
    fn keys_are_32_bytes_of_either_base64_and_never_echoed() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE, URL_SAFE_NO_PAD};
        // 0xfb.. encodes with `+`/`/` in standard and `-`/`_` in URL-safe base64.
        let bytes = [0xfbu8; KEY_LEN];
        for text in [
            STANDARD.encode(bytes),
            URL_SAFE.encode(bytes),
            URL_SAFE_NO_PAD.encode(bytes),
            format!("{}\n", STANDARD.encode(bytes)),
        ] {
            let ring = Keyring::new(&[Secret::from(text.as_str())]).unwrap();
            let same = Keyring::new(&[Secret::from(STANDARD.encode(bytes))]).unwrap();
            assert_eq!(
                same.open(b"", &ring.seal(b"", b"x").unwrap()).unwrap(),
                b"x"
            );
        }
        for bad in [
            "c2hvcnQ=".to_owned(),
            STANDARD.encode([1u8; 31]),
            STANDARD.encode([1u8; 33]),
            "not base64 at all: s3cr3t-value!".to_owned(),
            String::new(),
        ] {
            let err = Keyring::new(&[key(1), Secret::from(bad.as_str())]).unwrap_err();
            assert!(
                err.contains("key 2 of 2") && err.contains("standard or URL-safe base64"),
                "{err}"
            );
            assert!(bad.is_empty() || !err.contains(&bad), "{err}");
        }
        assert!(Keyring::new(&[]).is_err());
        assert!(Keyring::new(&vec![key(1); MAX_KEYS + 1]).is_err());
        let ring = Keyring::new(&[key(1)]).unwrap();
        assert!(!format!("{ring:?}").contains(&STANDARD.encode([1u8; KEY_LEN])));
    }

    #[test]
    fn an_ephemeral_key_is_random_and_says_so() {
        let a = Keyring::ephemeral().unwrap();
        let b = Keyring::ephemeral().unwrap();
        assert!(a.is_ephemeral() && !Keyring::new(&[key(1)]).unwrap().is_ephemeral());
        let sealed = a.seal(b"aad", b"v").unwrap();
        assert_eq!(a.open(b"aad", &sealed).unwrap(), b"v");
        assert_eq!(b.open(b"aad", &sealed), Err(OpenError::UnknownKey));
    }
}
