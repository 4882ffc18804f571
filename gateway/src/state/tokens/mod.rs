//! Upstream tokens: what the gateway, as an OAuth client of an upstream, holds on
//! behalf of each caller, sealed with [`keyring::Keyring`].

pub mod keyring;
