//! A response as the connection writer sends it: encoded bytes interleaved with file regions.
//!
//! Record data from the log is never copied into the response: a [`Chunk::File`] names the
//! region of a segment file, and the writer hands it to `sendfile(2)`.

use std::fs::File;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

/// One piece of a response frame.
#[derive(Debug, Clone)]
pub enum Chunk {
    Bytes(Bytes),
    File {
        file: Arc<File>,
        position: u64,
        len: usize,
    },
}

impl Chunk {
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> usize {
        match self {
            Chunk::Bytes(b) => b.len(),
            Chunk::File { len, .. } => *len,
        }
    }
}

/// A complete response frame, including its 4-byte size prefix.
#[derive(Debug, Default)]
pub struct Response {
    pub chunks: Vec<Chunk>,
    /// How long the connection reads no further request once this one is written: a quota's
    /// throttle time (Kafka mutes the client's channel for it).
    pub mute: std::time::Duration,
    /// Set by handlers for requests no client quota applies to (a follower's fetch).
    pub quota_exempt: bool,
}

impl Response {
    /// The whole frame with its file regions read in (for tests and the fuzz harness; the
    /// writer never does this).
    pub fn to_vec(&self) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len());
        for c in &self.chunks {
            match c {
                Chunk::Bytes(b) => out.extend_from_slice(b),
                Chunk::File {
                    file,
                    position,
                    len,
                } => {
                    let at = out.len();
                    out.resize(at + len, 0);
                    std::os::unix::fs::FileExt::read_exact_at(&**file, &mut out[at..], *position)?;
                }
            }
        }
        Ok(out)
    }

    /// A frame from one buffer whose first 4 bytes are reserved for the size prefix
    /// (see [`FrameBuf`]).
    pub fn from_frame(frame: Bytes) -> Response {
        Response {
            chunks: vec![Chunk::Bytes(frame)],
            mute: std::time::Duration::ZERO,
            quota_exempt: false,
        }
    }

    pub fn len(&self) -> usize {
        self.chunks.iter().map(Chunk::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.iter().all(Chunk::is_empty)
    }
}

/// Builds a frame made of bytes and file regions. The size prefix is filled in by
/// [`FrameBuf::finish`].
pub struct FrameBuf {
    chunks: Vec<Chunk>,
    buf: BytesMut,
    total: usize,
}

impl Default for FrameBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameBuf {
    pub fn new() -> FrameBuf {
        let mut buf = BytesMut::with_capacity(256);
        buf.put_i32(0);
        FrameBuf {
            chunks: Vec::new(),
            buf,
            total: 0,
        }
    }

    /// The byte buffer being filled (after the last file region).
    pub fn buf(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    pub fn push_file(&mut self, file: Arc<File>, position: u64, len: usize) {
        if len == 0 {
            return;
        }
        self.flush_bytes();
        self.total += len;
        self.chunks.push(Chunk::File {
            file,
            position,
            len,
        });
    }

    fn flush_bytes(&mut self) {
        if !self.buf.is_empty() {
            let b = self.buf.split().freeze();
            self.total += b.len();
            self.chunks.push(Chunk::Bytes(b));
        }
    }

    pub fn finish(mut self) -> Response {
        if self.chunks.is_empty() {
            let size = (self.buf.len() - 4) as i32;
            self.buf[..4].copy_from_slice(&size.to_be_bytes());
            return Response::from_frame(self.buf.freeze());
        }
        self.flush_bytes();
        let size = (self.total - 4) as i32;
        // The first chunk always starts with the reserved 4 bytes.
        if let Some(Chunk::Bytes(first)) = self.chunks.first_mut() {
            let mut patched = BytesMut::from(&first[..]);
            patched[..4].copy_from_slice(&size.to_be_bytes());
            *first = patched.freeze();
        }
        Response {
            chunks: self.chunks,
            mute: std::time::Duration::ZERO,
            quota_exempt: false,
        }
    }
}
