//! Seeded schedules of the simulated cluster. `SLUICE_SIM_SEEDS=N` runs N schedules per test
//! (default 1000); `SLUICE_SIM_SEED=S` runs only seed S, to reproduce a failure.

use std::panic::{AssertUnwindSafe, catch_unwind};

use super::world::SESSION_MS;
use super::{Faults, Outcome, World};

fn seeds(salt: u64) -> Vec<u64> {
    if let Ok(s) = std::env::var("SLUICE_SIM_SEED") {
        return vec![s.parse().expect("SLUICE_SIM_SEED is a number")];
    }
    let n: u64 = std::env::var("SLUICE_SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    (0..n).map(|i| i * 1_000_003 + salt).collect()
}

/// Runs every seed; a violated invariant fails with the seed that reproduces it.
fn run_all(salt: u64, faults: Faults, fault_ms: i64) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for seed in seeds(salt) {
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut w = World::new(seed, faults);
            w.run(fault_ms);
            w.heal_and_settle(15_000)
        }));
        match r {
            Ok(o) => {
                let mut isr = o.final_isr.clone();
                isr.sort();
                assert_eq!(
                    isr,
                    vec![1, 2, 3],
                    "seed {seed}: the ISR is not full again after healing: {o:?}"
                );
                assert!(o.acked > 0, "seed {seed}: nothing was acknowledged: {o:?}");
                outcomes.push(o);
            }
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panic!("seed {seed} (SLUICE_SIM_SEED={seed} to reproduce): {msg}");
            }
        }
    }
    println!(
        "sim (salt {salt}): {} schedules, {} records acknowledged (all committed), {} kill -9, \
         {} link cuts, {} leader elections",
        outcomes.len(),
        total(&outcomes, |o| o.acked),
        total(&outcomes, |o| o.crashes),
        total(&outcomes, |o| o.cuts),
        total(&outcomes, |o| o.elections)
    );
    outcomes
}

fn total(o: &[Outcome], f: impl Fn(&Outcome) -> usize) -> usize {
    o.iter().map(f).sum()
}

#[test]
fn crashes_and_restarts() {
    let o = run_all(
        1,
        Faults {
            crashes: true,
            link_cuts: false,
            controller_failover: true,
            drop_percent: 1,
        },
        30_000,
    );
    assert!(total(&o, |o| o.crashes) > 0 && total(&o, |o| o.elections) > o.len());
}

#[test]
fn link_cuts_and_zombie_leaders() {
    let o = run_all(
        2,
        Faults {
            crashes: false,
            link_cuts: true,
            controller_failover: false,
            drop_percent: 2,
        },
        30_000,
    );
    assert!(total(&o, |o| o.cuts) > 0 && total(&o, |o| o.elections) > o.len());
}

#[test]
fn everything_at_once() {
    let o = run_all(
        3,
        Faults {
            crashes: true,
            link_cuts: true,
            controller_failover: true,
            drop_percent: 5,
        },
        30_000,
    );
    assert!(total(&o, |o| o.acked) > 0);
}

/// Kills a follower with -9 and restarts it at once, its new incarnation naming the old one
/// (`proof`) or not. Its replica leaves the ISR well within the old session, stays out
/// until the new incarnation is registered and unfenced, then joins; after that the
/// partition stays as it is.
fn restart_a_follower_at_once(seed: u64, proof: bool) {
    let quiet = Faults {
        crashes: false,
        link_cuts: false,
        controller_failover: false,
        drop_percent: 0,
    };
    let mut w = World::new(seed, quiet);
    w.run(5_000);
    let p = w.partition(&w.image).expect("the topic").clone();
    let mut isr = p.isr.clone();
    isr.sort();
    assert_eq!(isr, vec![1, 2, 3], "seed {seed}: not settled: {p:?}");
    let f = *p.replicas.iter().find(|r| **r != p.leader).unwrap();
    let fb = f as usize;
    let killed_at = w.now;
    w.crash(fb);
    w.restart_with(fb, proof);
    let new = w.brokers[fb].incarnation;
    let mut left_at = None;
    let mut full_at = None;
    let mut settled_epoch = None;
    // 400 steps of 50 ms: 20 s of simulated time.
    for _ in 0..400 {
        let t = w.now + 50;
        w.run(t);
        let p = w.partition(&w.image).unwrap();
        let reg = &w.image.brokers[&f];
        let current = reg.registration.incarnation == new && !reg.fenced;
        let in_isr = p.isr.contains(&f);
        if !in_isr && left_at.is_none() {
            left_at = Some(w.now);
        }
        if in_isr && left_at.is_some() {
            assert!(
                current,
                "seed {seed} proof {proof}: {f} is back in the ISR at {} before its new \
                 incarnation is registered and unfenced: {reg:?}",
                w.now
            );
        }
        if left_at.is_some() && p.isr.len() == 3 && full_at.is_none() {
            full_at = Some(w.now);
            settled_epoch = Some((p.leader, p.leader_epoch, p.partition_epoch));
        }
        if let (Some(at), Some(e)) = (full_at, settled_epoch)
            && w.now > at
        {
            assert_eq!(
                (p.leader, p.leader_epoch, p.partition_epoch),
                e,
                "seed {seed} proof {proof}: the partition changed at {} after its ISR was full \
                 again at {at}: {p:?}",
                w.now
            );
        }
    }
    let left_at = left_at.unwrap_or_else(|| panic!("seed {seed}: {f} never left the ISR"));
    assert!(
        left_at < killed_at + SESSION_MS,
        "seed {seed} proof {proof}: {f} left the ISR only at {left_at} (killed at {killed_at})"
    );
    let full_at = full_at.unwrap_or_else(|| panic!("seed {seed}: the ISR is not full again"));
    assert!(
        w.now - full_at >= 5_000,
        "seed {seed} proof {proof}: full again only at {full_at}, too late to watch it"
    );
}

#[test]
fn a_follower_restarted_at_once_rejoins_only_as_its_new_incarnation() {
    for seed in 0..50 {
        restart_a_follower_at_once(seed, true);
        restart_a_follower_at_once(seed, false);
    }
}
