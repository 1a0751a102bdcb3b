//! Appending to a partition log: a leader's append (offsets and the leader epoch assigned
//! here) and a follower's (batches kept as the leader wrote them), both recording leader
//! epochs in the epoch cache.

use std::io;

use super::*;

impl Log {
    /// Appends a producer's record set (see [`Log::append_at`]) using the wall clock.
    pub fn append(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        append_time: Option<i64>,
        max_batch_bytes: usize,
    ) -> Result<AppendInfo, AppendError> {
        self.append_at(
            records,
            leader_epoch,
            append_time,
            max_batch_bytes,
            now_ms(),
        )
    }

    /// Validates `records`, assigns offsets from the log end offset, stamps the
    /// leader epoch and (if `append_time` is `Some`) LogAppendTime, rolls the
    /// active segment if needed and writes the bytes in one positional write.
    /// `now_ms` drives time-based roll and flush.
    pub fn append_at(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        append_time: Option<i64>,
        max_batch_bytes: usize,
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        if self.deleted {
            return Err(AppendError::Io(io::Error::other(
                "log directory was deleted",
            )));
        }
        let mut headers = batch::validate_for_append(records, max_batch_bytes)?;
        if records.len() as u64 > self.config.segment_bytes {
            return Err(AppendError::RecordSetTooLarge {
                size: records.len(),
                segment_bytes: self.config.segment_bytes,
            });
        }
        let first_offset = self.log_end_offset;
        let mut next = first_offset;
        let mut max_timestamp = -1;
        let mut offset_of_max_timestamp = first_offset;
        let mut record_count = 0u64;
        for h in headers.iter_mut() {
            let start = h.position as usize;
            let b = &mut records[start..start + h.total_size()];
            batch::set_base_offset(b, next);
            batch::set_partition_leader_epoch(b, leader_epoch);
            h.base_offset = next;
            h.partition_leader_epoch = leader_epoch;
            if let Some(t) = append_time {
                h.crc = batch::set_log_append_time(b, t);
                h.attributes |= batch::TIMESTAMP_TYPE_FLAG;
                h.max_timestamp = t;
            }
            if h.max_timestamp > max_timestamp {
                max_timestamp = h.max_timestamp;
                offset_of_max_timestamp = h.last_offset();
            }
            record_count += h.record_count as u64;
            next = h.next_offset();
        }
        let last_offset = next - 1;

        let mut rolled_at = None;
        if self
            .active()
            .should_roll(&self.config, records.len() as u64, last_offset, now_ms)
        {
            self.roll(now_ms)?;
            rolled_at = Some(first_offset);
        }
        self.active_mut().append(records, &headers, now_ms)?;
        self.log_end_offset = next;
        if self.epochs.cache.assign(leader_epoch, first_offset) {
            self.epochs_dirty = true;
        }
        self.size_bytes += records.len() as u64;
        self.after_append(record_count, now_ms)?;

        Ok(AppendInfo {
            first_offset,
            last_offset,
            log_append_time: append_time.unwrap_or(-1),
            max_timestamp,
            offset_of_max_timestamp,
            log_start_offset: self.log_start_offset,
            rolled_at,
            record_count,
            size_bytes: records.len(),
            batches: headers,
        })
    }

    /// Appends a follower's copy of the leader's batches as they are: their offsets, leader
    /// epochs and timestamps are kept (only checked). The first batch must start at or after
    /// the log end offset (a compacted leader's log has gaps) and offsets must increase.
    pub fn append_as_follower(
        &mut self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        if self.deleted {
            return Err(AppendError::Io(io::Error::other(
                "log directory was deleted",
            )));
        }
        let headers = batch::validate_replicated(records)?;
        let mut expect = self.log_end_offset;
        for h in &headers {
            if h.base_offset < expect {
                return Err(AppendError::OutOfOrder {
                    base_offset: h.base_offset,
                    log_end_offset: self.log_end_offset,
                });
            }
            expect = h.next_offset();
        }
        let first = headers.first().expect("validated record sets have a batch");
        let (first_offset, last_offset) = (first.base_offset, expect - 1);
        if records.len() as u64 > self.config.segment_bytes {
            return Err(AppendError::RecordSetTooLarge {
                size: records.len(),
                segment_bytes: self.config.segment_bytes,
            });
        }
        let mut rolled_at = None;
        if self
            .active()
            .should_roll(&self.config, records.len() as u64, last_offset, now_ms)
            || first_offset > self.log_end_offset && self.active().is_empty()
        {
            // An empty active segment named for the old log end cannot take a batch that
            // starts later: the new segment is named for the batch.
            if self.active().is_empty() {
                let base = self.active().base_offset();
                self.segments.remove(&base).expect("active").delete()?;
                self.segments.insert(
                    first_offset,
                    Segment::create(&self.dir, first_offset, &self.config)?,
                );
                if self.segments.len() == 1 {
                    self.log_start_offset = first_offset;
                }
            } else {
                self.log_end_offset = first_offset;
                self.roll(now_ms)?;
            }
            rolled_at = Some(first_offset);
        }
        self.active_mut().append(records, &headers, now_ms)?;
        self.log_end_offset = expect;
        self.size_bytes += records.len() as u64;
        let mut max_timestamp = -1;
        let mut offset_of_max_timestamp = first_offset;
        let mut record_count = 0u64;
        for h in &headers {
            if self
                .epochs
                .cache
                .assign(h.partition_leader_epoch, h.base_offset)
            {
                self.epochs_dirty = true;
            }
            if h.max_timestamp > max_timestamp {
                max_timestamp = h.max_timestamp;
                offset_of_max_timestamp = h.last_offset();
            }
            record_count += h.record_count as u64;
        }
        self.after_append(record_count, now_ms)?;
        Ok(AppendInfo {
            first_offset,
            last_offset,
            log_append_time: -1,
            max_timestamp,
            offset_of_max_timestamp,
            log_start_offset: self.log_start_offset,
            rolled_at,
            record_count,
            size_bytes: records.len(),
            batches: headers,
        })
    }

    /// Counts appended records and flushes per the flush policy.
    fn after_append(&mut self, record_count: u64, now_ms: i64) -> io::Result<()> {
        self.unflushed_messages += record_count;
        if self.unflushed_messages >= self.config.flush_interval_messages
            || now_ms.saturating_sub(self.last_flush_ms) >= self.config.flush_interval_ms
        {
            self.flush_at(now_ms)?;
        }
        Ok(())
    }
}
