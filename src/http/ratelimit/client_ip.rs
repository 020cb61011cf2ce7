//! The real client address: the peer, unless the peer is a trusted proxy,
//! in which case the nearest untrusted hop of `X-Forwarded-For`.

use std::net::IpAddr;

use axum::http::HeaderMap;
use ipnet::IpNet;

pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    // Walk from the nearest hop outward; the first untrusted one is the
    // client. Anything further left could be forged by that client.
    let hops = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect::<Vec<_>>();
    let mut client = peer;
    for hop in hops.iter().rev() {
        match hop.parse::<IpAddr>() {
            Ok(ip) => {
                client = ip;
                if !is_trusted(&ip) {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(xff: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", xff.parse().unwrap());
        h
    }

    #[test]
    fn only_trusted_peers_are_believed() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let peer: IpAddr = "10.1.1.1".parse().unwrap();
        let outsider: IpAddr = "203.0.113.9".parse().unwrap();
        let h = headers("198.51.100.7, 203.0.113.5, 10.2.2.2");
        assert_eq!(
            client_ip(peer, &h, &trusted),
            "203.0.113.5".parse::<IpAddr>().unwrap()
        );
        assert_eq!(client_ip(outsider, &h, &trusted), outsider);
        assert_eq!(client_ip(peer, &headers("garbage"), &trusted), peer);
        assert_eq!(client_ip(peer, &HeaderMap::new(), &[]), peer);
    }
}
