//! Property tests: quantity round-trips and ledger invariants.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use headroom_node_model::{
    ReservationLedger, Resources, format_cpu_millis, format_memory_bytes, parse_cpu_millis,
    parse_memory_bytes,
};
use proptest::prelude::*;

proptest! {
    #[test]
    fn cpu_round_trips(m in 0i64..=i64::MAX / 1000 * 1000) {
        prop_assert_eq!(parse_cpu_millis(&format_cpu_millis(m)), Ok(m));
    }

    #[test]
    fn memory_round_trips(b in 0i64..=i64::MAX) {
        prop_assert_eq!(parse_memory_bytes(&format_memory_bytes(b)), Ok(b));
    }

    #[test]
    fn binary_suffixes_scale(n in 0i64..1 << 20, shift in prop::sample::select(vec![("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40)])) {
        prop_assert_eq!(parse_memory_bytes(&format!("{n}{}", shift.0)), Ok(n << shift.1));
    }

    #[test]
    fn cpu_rounds_up_never_down(cores in 0u32..10_000, micro in 0u32..1_000_000) {
        let text = format!("{cores}.{micro:06}");
        let millis = parse_cpu_millis(&text).unwrap();
        let exact_micro = i64::from(cores) * 1_000_000 + i64::from(micro);
        prop_assert!(millis * 1000 >= exact_micro);
        prop_assert!(millis * 1000 - exact_micro < 1000);
    }

    #[test]
    fn parsers_never_panic(text in ".{0,40}") {
        let _ = parse_cpu_millis(&text);
        let _ = parse_memory_bytes(&text);
    }

    #[test]
    fn negatives_are_refused(n in 1i64..1_000_000, suffix in prop::sample::select(vec!["", "m", "Mi", "k", "e2"])) {
        let text = format!("-{n}{suffix}");
        prop_assert!(parse_cpu_millis(&text).is_err());
        prop_assert!(parse_memory_bytes(&text).is_err());
    }

    /// Whatever sequence of reserve/release/expire happens, the live total never exceeds the room
    /// available at the time of each reservation, and it equals the sum of live entries.
    #[test]
    fn ledger_never_overpromises(
        ops in prop::collection::vec((0u8..4, 0usize..8, 0i64..3000, 0i64..(4 << 30), 1u64..60, 0u64..20), 1..60),
        available_cpu in 0i64..8000,
        available_mem in 0i64..(8 << 30),
    ) {
        let start = Instant::now();
        let available = Resources::new(available_cpu, available_mem);
        let mut ledger = ReservationLedger::new();
        let mut clock = 0u64;
        for (op, id, cpu, mem, ttl, advance) in ops {
            clock += advance;
            let now = start + Duration::from_secs(clock);
            let id = format!("r{id}");
            match op {
                0 | 1 => {
                    let before = ledger.total(now);
                    let amount = Resources::new(cpu, mem);
                    let existed = ledger.get(&id).is_some();
                    let result = ledger.reserve(&id, "ns/pod", amount, now + Duration::from_secs(ttl), now, available);
                    let fits = before.checked_add(amount).unwrap().fits_within(&available);
                    prop_assert_eq!(result.is_ok(), fits && !existed);
                }
                2 => { ledger.release(&id); }
                _ => {
                    for r in ledger.expire(now) { prop_assert!(r.expires_at <= now); }
                    prop_assert!(ledger.iter().all(|r| r.expires_at > now));
                }
            }
            let total = ledger.total(now);
            prop_assert!(total.fits_within(&available), "total {total} over {available}");
            let live_sum = ledger.iter().filter(|r| r.expires_at > now)
                .fold(Resources::ZERO, |s, r| s.checked_add(r.amount).unwrap());
            prop_assert_eq!(total, live_sum);
        }
    }
}
