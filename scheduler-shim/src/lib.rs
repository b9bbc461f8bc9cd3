//! Scheduler shim (filled in by the shim work).
