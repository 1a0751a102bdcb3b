//! What a follower decides when it starts following a new leader (KIP-101 and KIP-279): it
//! asks the leader, with OffsetForLeaderEpoch, where its latest local epoch ends in the
//! leader's log, and truncates its own log to the point where the two agree before fetching.
//!
//! The leader answers (epoch E, end offset O): E is the largest epoch at or below the asked
//! one that the leader has, O the offset where the leader's next epoch starts (its log end
//! for its latest epoch). If E is the asked epoch, the logs agree up to O; if E is lower, the
//! follower's log after its own end of E is not the leader's, so it truncates to the smaller
//! of that end and O. An UNDEFINED answer (the leader has no epoch that old) falls back to
//! the high watermark, which every ISR member holds.

use crate::log::leader_epoch::{LeaderEpochCache, UNDEFINED_EPOCH};

/// The offset to truncate the local log to (nothing at or past it is kept); never above the
/// local log end.
pub fn truncation_offset(
    local: &LeaderEpochCache,
    local_leo: i64,
    local_hw: i64,
    leader_epoch: i32,
    leader_end_offset: i64,
) -> i64 {
    if leader_epoch == UNDEFINED_EPOCH || leader_end_offset < 0 {
        return local_hw.min(local_leo);
    }
    let (_, local_end) = local.end_offset_for(leader_epoch, local_leo);
    let local_end = if local_end < 0 { local_leo } else { local_end };
    leader_end_offset.min(local_end).min(local_leo)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(e: &[(i32, i64)]) -> LeaderEpochCache {
        LeaderEpochCache::from_pairs(e)
    }

    #[test]
    fn same_epoch_keeps_the_common_prefix() {
        // The follower has epoch 2 up to 120; the leader's epoch 2 ends at 100.
        let local = cache(&[(0, 0), (2, 50)]);
        assert_eq!(truncation_offset(&local, 120, 80, 2, 100), 100);
        // The leader has more in epoch 2 than the follower: nothing to cut.
        assert_eq!(truncation_offset(&local, 90, 80, 2, 100), 90);
    }

    #[test]
    fn divergent_epoch_is_cut_where_the_common_epoch_ends() {
        // The follower wrote epoch 3 (from 100) as a leader that lost its leadership; the new
        // leader never saw epoch 3 and answers with epoch 2 ending at 110.
        let local = cache(&[(0, 0), (2, 50), (3, 100)]);
        assert_eq!(truncation_offset(&local, 130, 90, 2, 110), 100);
        // The new leader's epoch 2 ended earlier than the follower's: cut at the leader's.
        assert_eq!(truncation_offset(&local, 130, 90, 2, 70), 70);
    }

    #[test]
    fn undefined_answer_falls_back_to_the_high_watermark() {
        let local = cache(&[(5, 0)]);
        assert_eq!(truncation_offset(&local, 40, 25, -1, -1), 25);
        assert_eq!(truncation_offset(&local, 20, 25, -1, -1), 20);
    }
}
