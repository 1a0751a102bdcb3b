use super::*;

fn seg(base: i64, next: i64, size: u64, ts: i64) -> SegmentInfo {
    SegmentInfo {
        base_offset: base,
        next_offset: next,
        size,
        index_entries: 1,
        time_index_entries: 1,
        largest_timestamp: ts,
        first_batch_timestamp: ts,
    }
}

fn compacted(ratio: f64) -> CompactionConfig {
    CompactionConfig {
        compact: true,
        delete: false,
        min_cleanable_ratio: ratio,
        ..CompactionConfig::default()
    }
}

fn candidate(checkpoint: Option<i64>, config: CompactionConfig) -> Candidate {
    Candidate {
        segments: vec![
            seg(0, 10, 100, 1_000),
            seg(10, 20, 100, 2_000),
            seg(20, 30, 100, 3_000),
        ],
        log_start_offset: 0,
        checkpoint,
        first_uncleanable: 30,
        config,
        pending_delete_horizon: None,
    }
}

#[test]
fn dirty_section_from_the_checkpoint_to_the_uncleanable_offset() {
    let c = candidate(Some(10), compacted(0.5));
    let cl = cleanable(&c, 10_000);
    assert_eq!((cl.first_dirty_offset, cl.end_offset), (10, 30));
    assert_eq!((cl.clean_bytes, cl.cleanable_bytes), (100, 200));
    assert!((cl.ratio() - 2.0 / 3.0).abs() < 1e-9);
    // A checkpoint outside the log counts from the log start.
    let c = candidate(Some(99), compacted(0.5));
    assert_eq!(cleanable(&c, 10_000).first_dirty_offset, 0);
}

#[test]
fn min_compaction_lag_stops_at_the_first_young_segment() {
    let mut cfg = compacted(0.5);
    cfg.min_compaction_lag_ms = 1_500;
    let c = candidate(None, cfg);
    // now - lag = 1_500: segment 10 (ts 2_000) is too young.
    assert_eq!(cleanable(&c, 3_000).end_offset, 10);
    assert_eq!(cleanable(&c, 3_000).cleanable_bytes, 100);
}

#[test]
fn max_compaction_lag_makes_a_log_due() {
    let mut cfg = compacted(0.99);
    cfg.max_compaction_lag_ms = 500;
    let c = candidate(Some(20), cfg);
    assert!(cleanable(&c, 1_000_000).needs_compaction_now);
    assert_eq!(choose(&[c], 1_000_000).map(|(i, _)| i), Some(0));
}

#[test]
fn the_dirtiest_log_past_its_ratio_is_chosen() {
    let low = candidate(Some(20), compacted(0.5)); // ratio 1/3
    let high = candidate(Some(10), compacted(0.5)); // ratio 2/3
    let all = candidate(None, compacted(0.5)); // ratio 1
    let not_compacted = candidate(None, CompactionConfig::default());
    assert_eq!(choose(std::slice::from_ref(&low), 0), None);
    assert_eq!(choose(&[low.clone(), high.clone()], 0).unwrap().0, 1);
    assert_eq!(choose(&[high, all, low], 0).unwrap().0, 1);
    assert_eq!(choose(&[not_compacted], 0), None);
}

#[test]
fn a_passed_delete_horizon_makes_a_clean_log_cleanable() {
    let mut c = candidate(Some(30), compacted(0.5));
    c.pending_delete_horizon = Some(5_000);
    assert_eq!(choose(std::slice::from_ref(&c), 4_999), None);
    assert_eq!(choose(&[c], 5_000).unwrap().0, 0);
}

#[test]
fn segments_grouped_within_size_and_index_limits() {
    let segs = [
        seg(0, 10, 40, 0),
        seg(10, 20, 40, 0),
        seg(20, 30, 40, 0),
        seg(30, 40, 90, 0),
    ];
    assert_eq!(group_by_size(&segs, 100, 10), vec![0..2, 2..3, 3..4]);
    assert_eq!(group_by_size(&segs, 1_000, 2), vec![0..2, 2..4]);
    assert_eq!(group_by_size(&segs, 1_000, 10), vec![0..4]);
    let wide = [
        seg(0, 10, 1, 0),
        seg(i32::MAX as i64, i32::MAX as i64 + 5, 1, 0),
    ];
    assert_eq!(group_by_size(&wide, 1_000, 10), vec![0..1, 1..2]);
}

#[test]
fn record_kept_if_latest_for_its_key_and_tombstones_until_their_horizon() {
    // Past the map: kept whatever it is.
    assert!(keep_record(50, 40, Some(60), false, false, None, 0));
    // Superseded.
    assert!(!keep_record(5, 40, Some(7), true, true, None, 0));
    assert!(keep_record(7, 40, Some(7), true, true, None, 0));
    // Keyless records go.
    assert!(!keep_record(7, 40, None, false, true, None, 0));
    // A tombstone stays until its batch's horizon passes.
    assert!(keep_record(7, 40, Some(7), true, false, None, 100));
    assert!(keep_record(7, 40, Some(7), true, false, Some(101), 100));
    assert!(!keep_record(7, 40, Some(7), true, false, Some(100), 100));
}

fn facts(pid: i64, last: i64, control: bool, txn: bool) -> BatchFacts {
    BatchFacts {
        producer_id: pid,
        producer_epoch: 0,
        last_offset: last,
        next_offset: last + 1,
        is_control: control,
        is_transactional: txn,
        delete_horizon_ms: None,
    }
}

#[test]
fn aborted_batches_go_and_markers_stay_until_their_transaction_is_gone() {
    let aborted = AbortedTxn {
        producer_id: 7,
        first_offset: 10,
        last_offset: 12,
        last_stable_offset: 10,
    };
    let mut t = TxnTracker::new(vec![aborted]);
    // Producer 8 commits at offset 11 around producer 7's aborted batch.
    assert!(!t.on_batch(&facts(8, 9, false, true)));
    assert!(t.on_batch(&facts(7, 10, false, true)));
    assert!(!t.on_control(&facts(8, 11, true, true), Control::Commit));
    // The abort marker stays this pass (its batch was seen) and is indexed.
    assert!(!t.on_control(&facts(7, 12, true, true), Control::Abort));
    assert_eq!(t.kept_aborted, vec![aborted]);
    // Next pass: the batch is gone, the marker may go too; a commit with nothing left as well.
    let mut t = TxnTracker::new(vec![aborted]);
    assert!(t.on_control(&facts(8, 11, true, true), Control::Commit));
    assert!(t.on_control(&facts(7, 12, true, true), Control::Abort));
    assert!(t.kept_aborted.is_empty());
}

#[test]
fn producers_last_batch_and_the_rounds_last_batch_are_kept_empty() {
    let mut last = HashMap::new();
    last.insert(
        5,
        LastRecord {
            last_data_offset: Some(9),
            producer_epoch: 0,
        },
    );
    let d = batch_decision(&facts(5, 9, false, false), false, &last, 100, 0);
    assert_eq!(d.retention, BatchRetention::RetainEmpty);
    let d = batch_decision(&facts(5, 8, false, false), false, &last, 100, 0);
    assert_eq!(d.retention, BatchRetention::DeleteEmpty);
    let d = batch_decision(&facts(-1, 99, false, false), false, &last, 100, 0);
    assert_eq!(d.retention, BatchRetention::RetainEmpty);
    // Aborted data: gone. A marker with nothing left: kept until its horizon passes.
    let d = batch_decision(&facts(6, 20, false, true), true, &last, 100, 0);
    assert_eq!(d.retention, BatchRetention::Delete);
    let mut marker = facts(6, 21, true, true);
    let d = batch_decision(&marker, true, &last, 100, 0);
    assert_eq!(
        (d.retention, d.marker_for_empty_txn),
        (BatchRetention::DeleteEmpty, true)
    );
    marker.delete_horizon_ms = Some(50);
    assert_eq!(
        batch_decision(&marker, true, &last, 100, 49).retention,
        BatchRetention::DeleteEmpty
    );
    assert_eq!(
        batch_decision(&marker, true, &last, 100, 50).retention,
        BatchRetention::Delete
    );
}
