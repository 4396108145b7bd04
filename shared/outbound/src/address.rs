//! Addresses outbound requests never reach. Written by hand over `std::net`
//! (its `is_global` is not stable); each range is named in `AddressClass`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    Loopback,
    /// RFC 1918.
    Private,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// fc00::/7.
    UniqueLocal,
    /// 100.64.0.0/10 (carrier-grade NAT).
    SharedCgnat,
    Multicast,
    /// 0.0.0.0/8, ::.
    Unspecified,
    Broadcast,
    /// Cloud instance metadata (169.254.169.254, fd00:ec2::254, 100.100.100.200).
    Metadata,
    /// 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32.
    Documentation,
    /// 198.18.0.0/15.
    Benchmarking,
    /// 192.0.0.0/24, 240.0.0.0/4, 100::/64, Teredo 2001::/32.
    Reserved,
}

impl AddressClass {
    pub fn as_str(self) -> &'static str {
        match self {
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::LinkLocal => "link-local",
            AddressClass::UniqueLocal => "unique-local",
            AddressClass::SharedCgnat => "shared (CGNAT)",
            AddressClass::Multicast => "multicast",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Broadcast => "broadcast",
            AddressClass::Metadata => "cloud metadata",
            AddressClass::Documentation => "documentation",
            AddressClass::Benchmarking => "benchmarking",
            AddressClass::Reserved => "reserved",
        }
    }
}

/// Why `address` is refused, or None when it is a public address.
pub fn refusal_of(address: IpAddr) -> Option<AddressClass> {
    match address {
        IpAddr::V4(v4) => refusal_of_v4(v4),
        IpAddr::V6(v6) => refusal_of_v6(v6),
    }
}

fn in_v4(address: Ipv4Addr, network: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    (u32::from(address) & mask) == (u32::from(Ipv4Addr::from(network)) & mask)
}

fn refusal_of_v4(address: Ipv4Addr) -> Option<AddressClass> {
    let ranges: [([u8; 4], u32, AddressClass); 17] = [
        ([169, 254, 169, 254], 32, AddressClass::Metadata),
        ([100, 100, 100, 200], 32, AddressClass::Metadata),
        ([255, 255, 255, 255], 32, AddressClass::Broadcast),
        ([0, 0, 0, 0], 8, AddressClass::Unspecified),
        ([10, 0, 0, 0], 8, AddressClass::Private),
        ([172, 16, 0, 0], 12, AddressClass::Private),
        ([192, 168, 0, 0], 16, AddressClass::Private),
        ([100, 64, 0, 0], 10, AddressClass::SharedCgnat),
        ([127, 0, 0, 0], 8, AddressClass::Loopback),
        ([169, 254, 0, 0], 16, AddressClass::LinkLocal),
        ([192, 0, 0, 0], 24, AddressClass::Reserved),
        ([192, 0, 2, 0], 24, AddressClass::Documentation),
        ([198, 51, 100, 0], 24, AddressClass::Documentation),
        ([203, 0, 113, 0], 24, AddressClass::Documentation),
        ([198, 18, 0, 0], 15, AddressClass::Benchmarking),
        ([224, 0, 0, 0], 4, AddressClass::Multicast),
        ([240, 0, 0, 0], 4, AddressClass::Reserved),
    ];
    ranges
        .iter()
        .find(|(network, prefix, _)| in_v4(address, *network, *prefix))
        .map(|(_, _, class)| *class)
}

fn in_v6(address: Ipv6Addr, network: Ipv6Addr, prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    (u128::from(address) & mask) == (u128::from(network) & mask)
}

/// The IPv4 address an IPv6 address carries, for the forms that route to it.
fn embedded_v4(address: Ipv6Addr) -> Option<Ipv4Addr> {
    let bits = u128::from(address);
    let low32 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated).
    if bits >> 32 == 0xffff || (bits >> 32 == 0 && bits > 1) {
        return Some(low32);
    }
    // 64:ff9b::/96 (NAT64).
    if in_v6(address, Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96) {
        return Some(low32);
    }
    // 2002::/16 (6to4): the IPv4 address is bits 16..48.
    if in_v6(address, Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16) {
        return Some(Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32));
    }
    None
}

fn refusal_of_v6(address: Ipv6Addr) -> Option<AddressClass> {
    if address.is_unspecified() {
        return Some(AddressClass::Unspecified);
    }
    if address.is_loopback() {
        return Some(AddressClass::Loopback);
    }
    if let Some(v4) = embedded_v4(address) {
        return refusal_of_v4(v4);
    }
    let ranges: [(Ipv6Addr, u32, AddressClass); 7] = [
        (
            Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254),
            128,
            AddressClass::Metadata,
        ),
        (
            Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0),
            7,
            AddressClass::UniqueLocal,
        ),
        (
            Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0),
            10,
            AddressClass::LinkLocal,
        ),
        (
            Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0),
            8,
            AddressClass::Multicast,
        ),
        (
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
            32,
            AddressClass::Documentation,
        ),
        (
            Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
            32,
            AddressClass::Reserved,
        ),
        (
            Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0),
            64,
            AddressClass::Reserved,
        ),
    ];
    ranges
        .iter()
        .find(|(network, prefix, _)| in_v6(address, *network, *prefix))
        .map(|(_, _, class)| *class)
}
