//! Seeded schedules of the simulated cluster. `SLUICE_SIM_SEEDS=N` runs N schedules per test
//! (default 1000); `SLUICE_SIM_SEED=S` runs only seed S, to reproduce a failure.

use std::panic::{AssertUnwindSafe, catch_unwind};

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
