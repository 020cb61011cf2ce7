//! The SSRF guard: a webhook may only reach public addresses, unless an
//! operator allowed a private network (`SERVICE_WEBHOOK_ALLOWED_NETWORKS`).
//!
//! Checked twice: when a URL is registered, and when a delivery connects,
//! by the HTTP client's own resolver ([`GuardedResolver`]): the addresses
//! it hands to the connector are the checked ones, so a name that resolves
//! to a public address at registration and to a private one later (DNS
//! rebinding) is refused at connect time. Literal addresses never reach a
//! resolver, so [`check_literal`] runs before every send.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use thiserror::Error;

/// Why an address may not be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forbidden {
    Unspecified,
    Loopback,
    Private,
    LinkLocal,
    /// Carrier-grade NAT, 100.64.0.0/10.
    SharedAddressSpace,
    Multicast,
    Broadcast,
    /// A cloud provider's metadata or host service.
    Metadata,
    /// Documentation, benchmarking, protocol and other reserved ranges.
    Reserved,
}

impl Forbidden {
    pub fn describe(self) -> &'static str {
        match self {
            Forbidden::Unspecified => "an unspecified address",
            Forbidden::Loopback => "a loopback address",
            Forbidden::Private => "a private address",
            Forbidden::LinkLocal => "a link-local address",
            Forbidden::SharedAddressSpace => "a carrier-grade NAT address",
            Forbidden::Multicast => "a multicast address",
            Forbidden::Broadcast => "the broadcast address",
            Forbidden::Metadata => "a cloud metadata address",
            Forbidden::Reserved => "a reserved address",
        }
    }
}

/// Why a webhook target is refused.
#[derive(Debug, Error)]
pub enum TargetError {
    #[error("url is not a valid absolute URL")]
    Unparsable,
    #[error("url must use http or https")]
    Scheme,
    #[error("url must not carry a user name or password")]
    Credentials,
    #[error("url has no host")]
    NoHost,
    #[error("url is longer than {max} characters")]
    TooLong { max: usize },
    #[error("url's host {host} is {}", reason.describe())]
    Forbidden { host: String, reason: Forbidden },
    #[error("url's host {host} cannot be resolved")]
    Unresolvable {
        host: String,
        #[source]
        source: std::io::Error,
    },
}

/// Cloud metadata endpoints outside the ranges refused anyway (AWS, GCP,
/// Azure and Oracle use 169.254.169.254, link-local; Alibaba 100.100.100.200,
/// CGNAT; AWS's IPv6 fd00:ec2::254 is unique-local).
const METADATA_V4: [Ipv4Addr; 1] = [Ipv4Addr::new(168, 63, 129, 16)];

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u8) -> bool {
    ipnet::Ipv4Net::new(Ipv4Addr::from(net), prefix)
        .unwrap_or_default()
        .contains(&ip)
}

fn classify_v4(ip: Ipv4Addr) -> Option<Forbidden> {
    let reserved = [
        ([192, 0, 0, 0], 24),
        ([192, 0, 2, 0], 24),
        ([198, 18, 0, 0], 15),
        ([198, 51, 100, 0], 24),
        ([203, 0, 113, 0], 24),
        ([240, 0, 0, 0], 4),
    ];
    Some(if ip.is_broadcast() {
        Forbidden::Broadcast
    } else if in_v4(ip, [0, 0, 0, 0], 8) {
        Forbidden::Unspecified
    } else if ip.is_loopback() {
        Forbidden::Loopback
    } else if ip.is_private() {
        Forbidden::Private
    } else if ip.is_link_local() {
        Forbidden::LinkLocal
    } else if in_v4(ip, [100, 64, 0, 0], 10) {
        Forbidden::SharedAddressSpace
    } else if ip.is_multicast() {
        Forbidden::Multicast
    } else if METADATA_V4.contains(&ip) {
        Forbidden::Metadata
    } else if reserved
        .iter()
        .any(|(net, prefix)| in_v4(ip, *net, *prefix))
    {
        Forbidden::Reserved
    } else {
        return None;
    })
}

/// The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    // ::a.b.c.d (deprecated compatible form) and 64:ff9b::/96 (NAT64).
    if s[..6] == [0; 6] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail);
    }
    // 2002:aabb:ccdd::/48 (6to4).
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

fn classify_v6(ip: Ipv6Addr) -> Option<Forbidden> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some(Forbidden::Unspecified);
    }
    if ip.is_loopback() {
        return Some(Forbidden::Loopback);
    }
    if let Some(v4) = embedded_v4(ip) {
        return classify_v4(v4);
    }
    Some(if s[0] & 0xfe00 == 0xfc00 {
        // fc00::/7, unique local (fd00:ec2::254 among them).
        Forbidden::Private
    } else if s[0] & 0xffc0 == 0xfe80 || s[0] & 0xffc0 == 0xfec0 {
        Forbidden::LinkLocal
    } else if ip.is_multicast() {
        Forbidden::Multicast
    } else if (s[0] == 0x2001 && matches!(s[1], 0 | 0x0db8)) || s[0] == 0x0100 {
        // Documentation, Teredo (carries an address of its own), discard.
        Forbidden::Reserved
    } else {
        return None;
    })
}

/// Whether `ip` may be reached: `Err` names why not. An address inside an
/// allowed network passes whatever it is (its IPv4 form for mapped ones).
pub fn classify(ip: IpAddr, allowed: &[IpNet]) -> Result<(), Forbidden> {
    let canonical = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 @ IpAddr::V4(_) => v4,
    };
    if allowed
        .iter()
        .any(|net| net.contains(&ip) || net.contains(&canonical))
    {
        return Ok(());
    }
    match match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    } {
        Some(reason) => Err(reason),
        None => Ok(()),
    }
}

/// Parses a webhook URL and checks what it may be: http(s), no credentials,
/// a host; not yet where it points.
pub fn parse_target(url: &str) -> Result<Url, TargetError> {
    let parsed = Url::parse(url).map_err(|_| TargetError::Unparsable)?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(TargetError::Scheme);
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(TargetError::Credentials);
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(TargetError::NoHost);
    }
    Ok(parsed)
}

/// The literal address of `url`'s host, refused when forbidden; `None`
/// for a name (the resolver checks those).
pub fn check_literal(url: &Url, allowed: &[IpNet]) -> Result<Option<IpAddr>, TargetError> {
    let ip = match url.host() {
        Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
        Some(url::Host::Domain(_)) => return Ok(None),
        None => return Err(TargetError::NoHost),
    };
    classify(ip, allowed).map_err(|reason| TargetError::Forbidden {
        host: ip.to_string(),
        reason,
    })?;
    Ok(Some(ip))
}

/// Resolves `host` and refuses it when any of its addresses is forbidden.
async fn resolve_checked(host: &str, allowed: &[IpNet]) -> Result<Vec<SocketAddr>, TargetError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|source| TargetError::Unresolvable {
            host: host.to_owned(),
            source,
        })?
        .collect();
    for addr in &addrs {
        classify(addr.ip(), allowed).map_err(|reason| TargetError::Forbidden {
            host: host.to_owned(),
            reason,
        })?;
    }
    Ok(addrs)
}

/// The registration check: the URL's form and every address it names now.
pub async fn check_target(url: &str, allowed: &[IpNet]) -> Result<Url, TargetError> {
    let parsed = parse_target(url)?;
    if check_literal(&parsed, allowed)?.is_none()
        && let Some(host) = parsed.host_str()
    {
        resolve_checked(host, allowed).await?;
    }
    Ok(parsed)
}

/// The HTTP client's resolver: hands the connector only checked addresses.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    allowed: Arc<Vec<IpNet>>,
}

impl GuardedResolver {
    pub fn new(allowed: Vec<IpNet>) -> Self {
        Self {
            allowed: Arc::new(allowed),
        }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allowed = self.allowed.clone();
        Box::pin(async move {
            let addrs = resolve_checked(name.as_str(), &allowed).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> Option<Forbidden> {
        classify(text.parse().unwrap(), &[]).err()
    }

    #[test]
    fn private_and_special_addresses_are_refused() {
        let cases = [
            ("127.0.0.1", Forbidden::Loopback),
            ("127.255.0.9", Forbidden::Loopback),
            ("0.0.0.0", Forbidden::Unspecified),
            ("10.1.2.3", Forbidden::Private),
            ("172.16.0.1", Forbidden::Private),
            ("192.168.1.1", Forbidden::Private),
            ("169.254.169.254", Forbidden::LinkLocal),
            ("100.64.0.1", Forbidden::SharedAddressSpace),
            ("100.127.255.254", Forbidden::SharedAddressSpace),
            ("224.0.0.1", Forbidden::Multicast),
            ("255.255.255.255", Forbidden::Broadcast),
            ("168.63.129.16", Forbidden::Metadata),
            ("198.18.0.1", Forbidden::Reserved),
            ("::1", Forbidden::Loopback),
            ("::", Forbidden::Unspecified),
            ("fe80::1", Forbidden::LinkLocal),
            ("fd00:ec2::254", Forbidden::Private),
            ("ff02::1", Forbidden::Multicast),
            ("::ffff:127.0.0.1", Forbidden::Loopback),
            ("::ffff:169.254.169.254", Forbidden::LinkLocal),
            ("::ffff:10.0.0.1", Forbidden::Private),
            ("64:ff9b::a9fe:a9fe", Forbidden::LinkLocal),
            ("2002:7f00:1::", Forbidden::Loopback),
            ("2001:db8::1", Forbidden::Reserved),
        ];
        for (ip, reason) in cases {
            assert_eq!(refused(ip), Some(reason), "{ip}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in ["93.184.216.34", "1.1.1.1", "100.128.0.1", "2606:4700::1111"] {
            assert_eq!(refused(ip), None, "{ip}");
        }
    }

    #[test]
    fn an_allowed_network_lets_its_addresses_through() {
        let allowed: Vec<IpNet> = vec!["127.0.0.0/8".parse().unwrap()];
        assert_eq!(classify("127.0.0.1".parse().unwrap(), &allowed), Ok(()));
        assert_eq!(
            classify("::ffff:127.0.0.1".parse().unwrap(), &allowed),
            Ok(())
        );
        assert_eq!(
            classify("10.0.0.1".parse().unwrap(), &allowed),
            Err(Forbidden::Private)
        );
    }

    #[test]
    fn urls_need_http_and_no_credentials() {
        assert!(matches!(
            parse_target("ftp://example.com/"),
            Err(TargetError::Scheme)
        ));
        assert!(matches!(
            parse_target("https://user:pw@example.com/"),
            Err(TargetError::Credentials)
        ));
        assert!(matches!(
            parse_target("not a url"),
            Err(TargetError::Unparsable)
        ));
        let url = parse_target("http://[::ffff:7f00:1]:8080/hook").unwrap();
        assert!(matches!(
            check_literal(&url, &[]),
            Err(TargetError::Forbidden {
                reason: Forbidden::Loopback,
                ..
            })
        ));
    }
}
