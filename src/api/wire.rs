//! Hand-written encoding of the few response fields around record data (Fetch), so that record
//! bytes can be sent from segment files without passing through a user-space buffer.
//! `flexible` selects the compact encodings of KIP-482 (request versions with tagged fields).

use bytes::{BufMut, BytesMut};

pub fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// Array length (non-null).
pub fn put_array_len(buf: &mut BytesMut, n: usize, flexible: bool) {
    if flexible {
        put_uvarint(buf, n as u32 + 1);
    } else {
        buf.put_i32(n as i32);
    }
}

/// A null array.
pub fn put_null_array(buf: &mut BytesMut, flexible: bool) {
    if flexible {
        put_uvarint(buf, 0);
    } else {
        buf.put_i32(-1);
    }
}

pub fn put_string(buf: &mut BytesMut, s: &str, flexible: bool) {
    if flexible {
        put_uvarint(buf, s.len() as u32 + 1);
    } else {
        buf.put_i16(s.len() as i16);
    }
    buf.put_slice(s.as_bytes());
}

/// The length prefix of a non-null bytes field whose `len` bytes follow.
pub fn put_bytes_len(buf: &mut BytesMut, len: usize, flexible: bool) {
    if flexible {
        put_uvarint(buf, len as u32 + 1);
    } else {
        buf.put_i32(len as i32);
    }
}

/// An empty tagged-field section (flexible versions only).
pub fn put_no_tags(buf: &mut BytesMut, flexible: bool) {
    if flexible {
        buf.put_u8(0);
    }
}
