//! Frame Streams (the framing dnstap travels in, github.com/farsightsec/
//! fstrm): data frames are a 32-bit big-endian length and the payload;
//! control frames start with a zero length ("escape"), then their own
//! length, type and fields. A bidirectional writer sends READY, waits for
//! ACCEPT, sends START, then data; it ends with STOP and waits for FINISH.
//! A file holds START, the data frames and STOP.

use thiserror::Error;

/// What every frame of this stream holds.
pub const CONTENT_TYPE: &[u8] = b"protobuf:dnstap.Dnstap";

/// Control frame types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlType {
    Accept = 1,
    Start = 2,
    Stop = 3,
    Ready = 4,
    Finish = 5,
}

impl ControlType {
    fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::Accept,
            2 => Self::Start,
            3 => Self::Stop,
            4 => Self::Ready,
            5 => Self::Finish,
            _ => return None,
        })
    }
}

/// The control field holding a content type.
const FIELD_CONTENT_TYPE: u32 = 1;
/// Longest control frame a reader must take (the fstrm limit).
const CONTROL_MAX: usize = 512;
/// Longest data frame taken when reading.
pub const DATA_MAX: usize = 1 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Control {
    pub kind: ControlType,
    pub content_types: Vec<Vec<u8>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    Data(Vec<u8>),
    Control(Control),
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("control frame of {0} bytes (at most 512)")]
    ControlTooLong(usize),
    #[error("data frame of {0} bytes is over the limit")]
    DataTooLong(usize),
    #[error("unknown control frame type {0}")]
    UnknownControl(u32),
    #[error("control frame field runs past its frame")]
    BadField,
    #[error("expected {expected:?}, got {got:?}")]
    Unexpected {
        expected: ControlType,
        got: ControlType,
    },
    #[error("the reader does not take {0:?}")]
    ContentType(String),
}

/// A control frame of `kind`, naming [`CONTENT_TYPE`] when `typed`.
pub fn control(kind: ControlType, typed: bool) -> Vec<u8> {
    let mut body = (kind as u32).to_be_bytes().to_vec();
    if typed {
        body.extend_from_slice(&FIELD_CONTENT_TYPE.to_be_bytes());
        body.extend_from_slice(&(CONTENT_TYPE.len() as u32).to_be_bytes());
        body.extend_from_slice(CONTENT_TYPE);
    }
    let mut out = vec![0, 0, 0, 0];
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Appends a data frame holding `payload`.
pub fn push_data(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Takes the first whole frame off `buf`: `Ok(None)` until one is there.
pub fn take_frame(buf: &mut Vec<u8>) -> Result<Option<Frame>, FrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = be32(buf) as usize;
    if len != 0 {
        if len > DATA_MAX {
            return Err(FrameError::DataTooLong(len));
        }
        if buf.len() < 4 + len {
            return Ok(None);
        }
        let payload = buf[4..4 + len].to_vec();
        buf.drain(..4 + len);
        return Ok(Some(Frame::Data(payload)));
    }
    if buf.len() < 8 {
        return Ok(None);
    }
    let clen = be32(&buf[4..]) as usize;
    if !(4..=CONTROL_MAX).contains(&clen) {
        return Err(FrameError::ControlTooLong(clen));
    }
    if buf.len() < 8 + clen {
        return Ok(None);
    }
    let body = &buf[8..8 + clen];
    let raw = be32(body);
    let kind = ControlType::from_u32(raw).ok_or(FrameError::UnknownControl(raw))?;
    let mut content_types = Vec::new();
    let mut at = 4;
    while at < body.len() {
        if body.len() < at + 8 {
            return Err(FrameError::BadField);
        }
        let (field, flen) = (be32(&body[at..]), be32(&body[at + 4..]) as usize);
        let value = body
            .get(at + 8..at + 8 + flen)
            .ok_or(FrameError::BadField)?;
        if field == FIELD_CONTENT_TYPE {
            content_types.push(value.to_vec());
        }
        at += 8 + flen;
    }
    buf.drain(..8 + clen);
    Ok(Some(Frame::Control(Control {
        kind,
        content_types,
    })))
}

/// The reader's answer to READY: an ACCEPT that takes dnstap (one that
/// names no content type takes anything).
pub fn check_accept(frame: &Frame) -> Result<(), FrameError> {
    let c = match frame {
        Frame::Control(c) => c,
        Frame::Data(_) => return Err(FrameError::BadField),
    };
    if c.kind != ControlType::Accept {
        return Err(FrameError::Unexpected {
            expected: ControlType::Accept,
            got: c.kind,
        });
    }
    if c.content_types.is_empty() || c.content_types.iter().any(|t| t == CONTENT_TYPE) {
        Ok(())
    } else {
        let named = c.content_types.iter().map(|t| String::from_utf8_lossy(t));
        Err(FrameError::ContentType(
            named.collect::<Vec<_>>().join(", "),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_frames_round_trip_with_their_content_type() {
        let mut buf = control(ControlType::Ready, true);
        buf.extend(control(ControlType::Finish, false));
        let ready = take_frame(&mut buf).unwrap().unwrap();
        assert_eq!(
            ready,
            Frame::Control(Control {
                kind: ControlType::Ready,
                content_types: vec![CONTENT_TYPE.to_vec()],
            })
        );
        let finish = take_frame(&mut buf).unwrap().unwrap();
        assert!(
            matches!(finish, Frame::Control(c) if c.kind == ControlType::Finish && c.content_types.is_empty())
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn data_frames_wait_until_whole() {
        let mut whole = Vec::new();
        push_data(&mut whole, b"hello");
        let mut buf = whole[..6].to_vec();
        assert_eq!(take_frame(&mut buf), Ok(None));
        buf.extend_from_slice(&whole[6..]);
        assert_eq!(
            take_frame(&mut buf),
            Ok(Some(Frame::Data(b"hello".to_vec())))
        );
        assert_eq!(take_frame(&mut buf), Ok(None));
    }

    #[test]
    fn an_accept_must_take_dnstap() {
        let mut ok = control(ControlType::Accept, true);
        assert_eq!(check_accept(&take_frame(&mut ok).unwrap().unwrap()), Ok(()));
        let mut untyped = control(ControlType::Accept, false);
        assert_eq!(
            check_accept(&take_frame(&mut untyped).unwrap().unwrap()),
            Ok(())
        );
        let mut other = vec![0, 0, 0, 0, 0, 0, 0, 15, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 3];
        other.extend_from_slice(b"abc");
        let frame = take_frame(&mut other).unwrap().unwrap();
        assert_eq!(
            check_accept(&frame),
            Err(FrameError::ContentType("abc".into()))
        );
        let mut start = control(ControlType::Start, true);
        assert!(matches!(
            check_accept(&take_frame(&mut start).unwrap().unwrap()),
            Err(FrameError::Unexpected { .. })
        ));
    }

    #[test]
    fn malformed_control_frames_are_errors() {
        let mut long = vec![0, 0, 0, 0, 0, 0, 4, 0];
        assert_eq!(take_frame(&mut long), Err(FrameError::ControlTooLong(1024)));
        let mut unknown = vec![0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 9];
        assert_eq!(take_frame(&mut unknown), Err(FrameError::UnknownControl(9)));
        let mut past = vec![0, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9];
        assert_eq!(take_frame(&mut past), Err(FrameError::BadField));
    }
}
