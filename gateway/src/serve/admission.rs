//! Connection admission per client: at most `server.max_connections_per_address`
//! connections of one client address are served at once. Without it one client
//! holding thousands of idle sockets takes every place under `max_connections`, and
//! everyone else's connections wait in the kernel's accept queue until they time out.
//! A connection over its address's share is accepted and closed at once: the accept
//! queue keeps moving, so the other clients' connections are reached.
//!
//! A client is its IP address; IPv6 by its /64 (what one host is usually given), so
//! a host cannot step around its share by using many addresses of its own prefix.
//! Behind a proxy every client has the proxy's address: raise the share to what the
//! proxy opens.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// The client an address belongs to: IPv4 (and IPv4-mapped IPv6) as it is, IPv6 as its
/// /64 (the rest zeroed).
pub(crate) fn client_of(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V6(v6) => {
            let mut octets = v6.octets();
            octets[8..].fill(0);
            IpAddr::from(octets)
        }
        v4 => v4,
    }
}

/// The connections served per client.
pub(super) struct PerAddress {
    share: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One admitted connection: counted for its client until dropped.
pub(super) struct Admitted {
    table: Arc<PerAddress>,
    client: IpAddr,
}

impl PerAddress {
    pub(super) fn new(share: usize) -> Arc<PerAddress> {
        Arc::new(PerAddress {
            share: share.max(1),
            open: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        // Every change is one counter write: a panic elsewhere leaves it consistent.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for a connection from `address`, unless its client has its share open.
    pub(super) fn admit(self: &Arc<Self>, address: IpAddr) -> Option<Admitted> {
        let client = client_of(address);
        let mut open = self.lock();
        let count = open.entry(client).or_insert(0);
        if *count >= self.share {
            return None;
        }
        *count += 1;
        Some(Admitted {
            table: self.clone(),
            client,
        })
    }

    #[cfg(test)]
    fn open(&self, address: IpAddr) -> usize {
        self.lock().get(&client_of(address)).copied().unwrap_or(0)
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.table.lock();
        if let Some(count) = open.get_mut(&self.client) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                // Forget clients with nothing open: the table holds only live ones.
                open.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_gets_its_share_and_others_theirs() {
        let table = PerAddress::new(2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let first = table.admit(a).expect("first");
        let _second = table.admit(a).expect("second");
        assert!(table.admit(a).is_none(), "over its share");
        assert!(table.admit(b).is_some(), "another client is not affected");
        drop(first);
        assert_eq!(table.open(a), 1);
        assert!(
            table.admit(a).is_some(),
            "a closed connection frees its place"
        );
    }

    #[test]
    fn ipv6_clients_are_their_64() {
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let other: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        assert_eq!(client_of(one), client_of(other));
        assert_ne!(
            client_of(one),
            client_of("2001:db8:1:3::1".parse().unwrap())
        );
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert_eq!(client_of(mapped), "192.0.2.1".parse::<IpAddr>().unwrap());
        let table = PerAddress::new(1);
        let _held = table.admit(one).unwrap();
        assert!(table.admit(other).is_none());
    }
}
