//! The wire format of Confluent's serializers, in which a key or value names the registry
//! schema it was written with: the magic byte 0, the schema id as 4 big-endian bytes, then
//! the serialized data. Pure.

/// `data` framed for schema `id`.
pub fn frame(id: i32, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + data.len());
    out.push(0);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(data);
    out
}

/// The schema id and the data of a framed value; None when it is not in the wire format.
pub fn unframe(bytes: &[u8]) -> Option<(i32, &[u8])> {
    match bytes {
        [0, a, b, c, d, rest @ ..] => Some((i32::from_be_bytes([*a, *b, *c, *d]), rest)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_format_is_magic_id_data() {
        let framed = frame(258, b"xy");
        assert_eq!(framed, [0, 0, 0, 1, 2, b'x', b'y']);
        assert_eq!(unframe(&framed), Some((258, &b"xy"[..])));
        assert_eq!(unframe(b"\x01\x00\x00\x00\x01"), None);
        assert_eq!(unframe(b"\x00\x00"), None);
    }
}
