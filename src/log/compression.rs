//! Compression of the records section of a record batch.
//!
//! Batches are stored exactly as the producer compressed them; the log looks inside a batch
//! when it has to find a record by timestamp, and the log cleaner compresses the batches it
//! rebuilds again with the codec they came with, as Kafka's cleaner does.

use std::io::Read;

/// Compression codec, as stored in bits 0-2 of the batch attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// Codec of a batch given its attributes; `None` for the unassigned ids 5-7.
    pub fn from_attributes(attributes: i16) -> Option<Compression> {
        Compression::from_id((attributes & 0x07) as u8)
    }

    pub fn from_id(id: u8) -> Option<Compression> {
        match id {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        }
    }

    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CompressionError {
    #[error("{codec:?} decompression failed: {reason}")]
    Decode { codec: Compression, reason: String },
    #[error("decompressed data exceeds the limit of {limit} bytes")]
    TooLarge { limit: usize },
}

/// Magic at the start of the xerial snappy-java framing used by the Java client.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// Magic + two i32 version fields.
const XERIAL_HEADER_LEN: usize = 16;
/// Stream identifier chunk of the official snappy framing format.
const SNAPPY_FRAMED_MAGIC: [u8; 10] = [0xff, 0x06, 0x00, 0x00, b's', b'N', b'a', b'P', b'p', b'Y'];

fn decode_err(codec: Compression, e: impl std::fmt::Display) -> CompressionError {
    CompressionError::Decode {
        codec,
        reason: e.to_string(),
    }
}

/// Reads all of `reader` into a vector, failing if more than `limit` bytes come out.
fn read_limited(
    codec: Compression,
    reader: impl Read,
    limit: usize,
    size_hint: usize,
) -> Result<Vec<u8>, CompressionError> {
    let mut out = Vec::with_capacity(size_hint.min(limit));
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| decode_err(codec, e))?;
    if out.len() > limit {
        return Err(CompressionError::TooLarge { limit });
    }
    Ok(out)
}

/// Decompresses `input` (the records section of a batch) with `codec`.
/// `limit` bounds the decompressed size. `Compression::None` returns a copy.
pub fn decompress(
    codec: Compression,
    input: &[u8],
    limit: usize,
) -> Result<Vec<u8>, CompressionError> {
    let hint = input.len().saturating_mul(4);
    match codec {
        Compression::None => {
            if input.len() > limit {
                return Err(CompressionError::TooLarge { limit });
            }
            Ok(input.to_vec())
        }
        Compression::Gzip => {
            read_limited(codec, flate2::read::MultiGzDecoder::new(input), limit, hint)
        }
        Compression::Snappy => decompress_snappy(input, limit),
        Compression::Lz4 => read_limited(
            codec,
            lz4_flex::frame::FrameDecoder::new(input),
            limit,
            hint,
        ),
        Compression::Zstd => decompress_zstd(input, limit, hint),
    }
}

/// Snappy's blocks in the xerial framing are at most this long before compression (the
/// snappy-java `SnappyOutputStream` default Kafka's producer uses).
const XERIAL_BLOCK: usize = 32 * 1024;

/// Compresses `input` (the records section of a batch) with `codec`, in the framing Kafka's
/// own producer writes: gzip, xerial-framed snappy, the LZ4 frame format (64 KiB independent
/// blocks) and a zstd frame.
pub fn compress(codec: Compression, input: &[u8]) -> Vec<u8> {
    use std::io::Write;
    match codec {
        Compression::None => input.to_vec(),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            // Writes into a Vec cannot fail.
            let _ = e.write_all(input);
            e.finish().unwrap_or_default()
        }
        Compression::Snappy => {
            let mut out = XERIAL_MAGIC.to_vec();
            // snappy-java's header: version 1, compatible version 1.
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut enc = snap::raw::Encoder::new();
            for chunk in input.chunks(XERIAL_BLOCK) {
                let block = enc.compress_vec(chunk).unwrap_or_default();
                out.extend_from_slice(&(block.len() as i32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            out
        }
        Compression::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut e = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            let _ = e.write_all(input);
            e.finish().unwrap_or_default()
        }
        Compression::Zstd => {
            ruzstd::encoding::compress_to_vec(input, ruzstd::encoding::CompressionLevel::Fastest)
        }
    }
}

fn snappy_raw_into(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), CompressionError> {
    let codec = Compression::Snappy;
    let len = snap::raw::decompress_len(block).map_err(|e| decode_err(codec, e))?;
    if out.len() + len > limit {
        return Err(CompressionError::TooLarge { limit });
    }
    let start = out.len();
    out.resize(start + len, 0);
    let n = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| decode_err(codec, e))?;
    out.truncate(start + n);
    Ok(())
}

fn decompress_snappy(input: &[u8], limit: usize) -> Result<Vec<u8>, CompressionError> {
    let codec = Compression::Snappy;
    if input.len() >= XERIAL_HEADER_LEN && input[..8] == XERIAL_MAGIC {
        // xerial framing: header, then blocks of [i32 BE length][raw snappy block].
        let mut out = Vec::with_capacity(input.len().saturating_mul(4).min(limit));
        let mut pos = XERIAL_HEADER_LEN;
        while pos < input.len() {
            if input.len() - pos < 4 {
                return Err(decode_err(codec, "truncated xerial block length"));
            }
            let len = i32::from_be_bytes(input[pos..pos + 4].try_into().unwrap());
            pos += 4;
            if len < 0 || len as usize > input.len() - pos {
                return Err(decode_err(codec, "bad xerial block length"));
            }
            snappy_raw_into(&input[pos..pos + len as usize], &mut out, limit)?;
            pos += len as usize;
        }
        Ok(out)
    } else if input.starts_with(&SNAPPY_FRAMED_MAGIC) {
        read_limited(
            codec,
            snap::read::FrameDecoder::new(input),
            limit,
            input.len() * 4,
        )
    } else {
        let mut out = Vec::new();
        snappy_raw_into(input, &mut out, limit)?;
        Ok(out)
    }
}

fn decompress_zstd(input: &[u8], limit: usize, hint: usize) -> Result<Vec<u8>, CompressionError> {
    let codec = Compression::Zstd;
    let mut out = Vec::with_capacity(hint.min(limit));
    let mut rest = input;
    // A payload may hold several concatenated frames.
    while !rest.is_empty() {
        let decoder =
            ruzstd::decoding::StreamingDecoder::new(&mut rest).map_err(|e| decode_err(codec, e))?;
        let room = (limit - out.len()) as u64;
        decoder
            .take(room + 1)
            .read_to_end(&mut out)
            .map_err(|e| decode_err(codec, e))?;
        if out.len() > limit {
            return Err(CompressionError::TooLarge { limit });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn sample() -> Vec<u8> {
        (0..5000u32).flat_map(|i| (i % 251).to_be_bytes()).collect()
    }

    #[test]
    fn none_and_limits() {
        let data = sample();
        assert_eq!(
            decompress(Compression::None, &data, usize::MAX).unwrap(),
            data
        );
        assert!(matches!(
            decompress(Compression::None, &data, 10),
            Err(CompressionError::TooLarge { .. })
        ));
    }

    #[test]
    fn gzip_roundtrip_and_limit() {
        let data = sample();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&data).unwrap();
        let z = enc.finish().unwrap();
        assert_eq!(decompress(Compression::Gzip, &z, 1 << 20).unwrap(), data);
        assert!(matches!(
            decompress(Compression::Gzip, &z, 100),
            Err(CompressionError::TooLarge { .. })
        ));
        assert!(decompress(Compression::Gzip, &z[..z.len() / 2], 1 << 20).is_err());
    }

    #[test]
    fn compressed_with_every_codec_reads_back() {
        let data = sample();
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let c = compress(codec, &data);
            if codec != Compression::None {
                assert!(c.len() < data.len(), "{codec:?} did not compress");
            }
            assert_eq!(decompress(codec, &c, 1 << 20).unwrap(), data, "{codec:?}");
        }
        let c = compress(Compression::Snappy, &data);
        assert_eq!(c[..8], XERIAL_MAGIC);
        assert_eq!(
            decompress(Compression::Snappy, &compress(Compression::Snappy, &[]), 10).unwrap(),
            b""
        );
    }

    #[test]
    fn snappy_raw_xerial_and_framed() {
        let data = sample();
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &raw, 1 << 20).unwrap(),
            data
        );

        let mut xerial = XERIAL_MAGIC.to_vec();
        xerial.extend_from_slice(&1i32.to_be_bytes());
        xerial.extend_from_slice(&1i32.to_be_bytes());
        for chunk in data.chunks(3000) {
            let block = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
            xerial.extend_from_slice(&(block.len() as i32).to_be_bytes());
            xerial.extend_from_slice(&block);
        }
        assert_eq!(
            decompress(Compression::Snappy, &xerial, 1 << 20).unwrap(),
            data
        );
        assert!(decompress(Compression::Snappy, &xerial[..xerial.len() - 3], 1 << 20).is_err());

        let mut framed = snap::write::FrameEncoder::new(Vec::new());
        framed.write_all(&data).unwrap();
        let framed = framed.into_inner().unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &framed, 1 << 20).unwrap(),
            data
        );
    }

    #[test]
    fn lz4_frame() {
        let data = sample();
        let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
        enc.write_all(&data).unwrap();
        let z = enc.finish().unwrap();
        assert_eq!(decompress(Compression::Lz4, &z, 1 << 20).unwrap(), data);
    }

    #[test]
    fn zstd_precomputed_frame() {
        // `printf 'hello sluice hello sluice hello sluice\n' | zstd -19 -c | xxd -i`
        // (zstd CLI v1.5.4 from Debian).
        let frame = ZSTD_HELLO;
        let out = decompress(Compression::Zstd, frame, 1 << 20).unwrap();
        assert_eq!(out, b"hello sluice hello sluice hello sluice\n");
        // Two concatenated frames decode to the concatenation.
        let two = [frame, frame].concat();
        let out = decompress(Compression::Zstd, &two, 1 << 20).unwrap();
        assert_eq!(out.len(), 2 * 39);
        assert!(matches!(
            decompress(Compression::Zstd, frame, 5),
            Err(CompressionError::TooLarge { .. })
        ));
    }

    const ZSTD_HELLO: &[u8] = &[
        0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x68, 0xa5, 0x00, 0x00, 0x70, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
        0x20, 0x73, 0x6c, 0x75, 0x69, 0x63, 0x65, 0x20, 0x0a, 0x01, 0x00, 0xb0, 0xcc, 0x2f, 0x55,
        0x9a, 0x7a, 0x37,
    ];
}
