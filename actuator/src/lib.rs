//! Actuator (filled in by the actuator work).
