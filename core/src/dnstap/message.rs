//! The dnstap schema (`dnstap.proto` of github.com/dnstap/dnstap.pb), the
//! fields an authoritative server fills, as prost messages, and one
//! [`Event`] (a query or a response seen by either path) encoded into it.

use std::net::{IpAddr, SocketAddr};

use prost::Message as _;

/// `Dnstap`: the envelope of every frame.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Dnstap {
    #[prost(bytes = "vec", optional, tag = "1")]
    pub identity: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub version: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub extra: Option<Vec<u8>>,
    #[prost(message, optional, tag = "14")]
    pub message: Option<Message>,
    /// Always `MESSAGE` (1).
    #[prost(int32, required, tag = "15")]
    pub r#type: i32,
}

/// `Message`: one DNS message and where and when it was seen.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Message {
    #[prost(int32, required, tag = "1")]
    pub r#type: i32,
    #[prost(int32, optional, tag = "2")]
    pub socket_family: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub socket_protocol: Option<i32>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub query_address: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "5")]
    pub response_address: Option<Vec<u8>>,
    #[prost(uint32, optional, tag = "6")]
    pub query_port: Option<u32>,
    #[prost(uint32, optional, tag = "7")]
    pub response_port: Option<u32>,
    #[prost(uint64, optional, tag = "8")]
    pub query_time_sec: Option<u64>,
    #[prost(fixed32, optional, tag = "9")]
    pub query_time_nsec: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "10")]
    pub query_message: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "11")]
    pub query_zone: Option<Vec<u8>>,
    #[prost(uint64, optional, tag = "12")]
    pub response_time_sec: Option<u64>,
    #[prost(fixed32, optional, tag = "13")]
    pub response_time_nsec: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "14")]
    pub response_message: Option<Vec<u8>>,
}

/// `Dnstap.Type.MESSAGE`.
const DNSTAP_MESSAGE: i32 = 1;
/// `Message.Type.AUTH_QUERY` and `AUTH_RESPONSE`.
const AUTH_QUERY: i32 = 1;
const AUTH_RESPONSE: i32 = 2;
/// `SocketFamily`.
const INET: i32 = 1;
const INET6: i32 = 2;

/// Which message of an exchange an event holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Query,
    Response,
}

/// `SocketProtocol`: how the message travelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Udp = 1,
    Tcp = 2,
}

/// A time as seconds and nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct WallTime {
    pub secs: u64,
    pub nanos: u32,
}

/// One message seen by the server: the query, or the response with the
/// time of the query it answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub direction: Direction,
    pub protocol: Protocol,
    pub client: SocketAddr,
    pub server: SocketAddr,
    pub query_time: WallTime,
    /// Set for responses.
    pub response_time: Option<WallTime>,
    /// The DNS message, as sent or received.
    pub message: Vec<u8>,
    /// Free text in `Dnstap.extra` (the kernel's decision).
    pub extra: Option<Vec<u8>>,
}

/// The writer's `identity` and `version`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    pub identity: Option<Vec<u8>>,
    pub version: Option<Vec<u8>>,
}

fn address(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

impl Event {
    /// The `Dnstap` protobuf of this event.
    pub fn into_dnstap(self, origin: &Origin) -> Dnstap {
        let family = match self.client.ip() {
            IpAddr::V4(_) => INET,
            IpAddr::V6(_) => INET6,
        };
        let mut m = Message {
            socket_family: Some(family),
            socket_protocol: Some(self.protocol as i32),
            query_address: Some(address(self.client.ip())),
            response_address: Some(address(self.server.ip())),
            query_port: Some(u32::from(self.client.port())),
            response_port: Some(u32::from(self.server.port())),
            query_time_sec: Some(self.query_time.secs),
            query_time_nsec: Some(self.query_time.nanos),
            ..Message::default()
        };
        match self.direction {
            Direction::Query => {
                m.r#type = AUTH_QUERY;
                m.query_message = Some(self.message);
            }
            Direction::Response => {
                m.r#type = AUTH_RESPONSE;
                let t = self.response_time.unwrap_or(self.query_time);
                m.response_time_sec = Some(t.secs);
                m.response_time_nsec = Some(t.nanos);
                m.response_message = Some(self.message);
            }
        }
        Dnstap {
            identity: origin.identity.clone(),
            version: origin.version.clone(),
            extra: self.extra,
            message: Some(m),
            r#type: DNSTAP_MESSAGE,
        }
    }

    /// The frame payload: the encoded `Dnstap` message.
    pub fn encode(self, origin: &Origin) -> Vec<u8> {
        self.into_dnstap(origin).encode_to_vec()
    }
}

impl Dnstap {
    /// A frame payload read back (`None`: not a `Dnstap` message).
    pub fn decode_frame(payload: &[u8]) -> Option<Dnstap> {
        Dnstap::decode(payload).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(direction: Direction) -> Event {
        Event {
            direction,
            protocol: Protocol::Tcp,
            client: "[2001:db8::7]:5353".parse().unwrap(),
            server: "[2001:db8::53]:53".parse().unwrap(),
            query_time: WallTime {
                secs: 1_700_000_000,
                nanos: 5,
            },
            response_time: Some(WallTime {
                secs: 1_700_000_001,
                nanos: 6,
            }),
            message: vec![1, 2, 3],
            extra: None,
        }
    }

    #[test]
    fn a_response_round_trips_with_its_addresses_times_and_bytes() {
        let origin = Origin {
            identity: Some(b"ns1".to_vec()),
            version: Some(b"xdpdns 0.1".to_vec()),
        };
        let bytes = event(Direction::Response).encode(&origin);
        let d = Dnstap::decode(bytes.as_slice()).unwrap();
        assert_eq!(d.r#type, 1);
        assert_eq!(d.identity.as_deref(), Some(&b"ns1"[..]));
        let m = d.message.unwrap();
        assert_eq!(m.r#type, AUTH_RESPONSE);
        assert_eq!(m.socket_family, Some(INET6));
        assert_eq!(m.socket_protocol, Some(2));
        assert_eq!(m.query_port, Some(5353));
        assert_eq!(m.response_port, Some(53));
        assert_eq!(m.query_address.unwrap()[15], 7);
        assert_eq!(m.response_time_sec, Some(1_700_000_001));
        assert_eq!(m.response_time_nsec, Some(6));
        assert_eq!(m.response_message.as_deref(), Some(&[1u8, 2, 3][..]));
        assert_eq!(m.query_message, None);
    }

    #[test]
    fn a_query_carries_the_query_and_no_response_time() {
        let d = Dnstap::decode(
            event(Direction::Query)
                .encode(&Origin::default())
                .as_slice(),
        )
        .unwrap();
        let m = d.message.unwrap();
        assert_eq!(m.r#type, AUTH_QUERY);
        assert_eq!(m.query_message.as_deref(), Some(&[1u8, 2, 3][..]));
        assert_eq!((m.response_time_sec, m.response_message), (None, None));
        assert_eq!(d.identity, None);
    }
}
