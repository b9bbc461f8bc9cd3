//! Benchmark helpers (filled in by the benchmark work).
