//! Kubernetes quantities: never a panic; a value that parses is non-negative and round-trips
//! through the canonical formatter to the same number.
#![no_main]

use headroom_node_model::{format_cpu_millis, format_memory_bytes, parse_cpu_millis, parse_memory_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(millis) = parse_cpu_millis(&text) {
        assert!(millis >= 0, "{text:?} parsed to negative {millis}m");
        let canonical = format_cpu_millis(millis);
        assert_eq!(
            parse_cpu_millis(&canonical),
            Ok(millis),
            "{text:?} -> {millis}m -> {canonical:?} does not re-parse to the same value"
        );
    }
    if let Ok(bytes) = parse_memory_bytes(&text) {
        assert!(bytes >= 0, "{text:?} parsed to negative {bytes} bytes");
        let canonical = format_memory_bytes(bytes);
        assert_eq!(
            parse_memory_bytes(&canonical),
            Ok(bytes),
            "{text:?} -> {bytes} -> {canonical:?} does not re-parse to the same value"
        );
    }
    // A number with a leading '-' is never accepted as a non-zero amount.
    if text.trim_start().starts_with('-') {
        assert!(matches!(parse_cpu_millis(&text), Err(_) | Ok(0)), "{text:?}");
        assert!(matches!(parse_memory_bytes(&text), Err(_) | Ok(0)), "{text:?}");
    }
});
