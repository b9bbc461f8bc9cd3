//! Pressure stall information (v2, or v1 with `psi=1` on a hybrid host's unified mount):
//! `cpu.pressure`, `memory.pressure`, `io.pressure`.

/// `cpu.pressure`.
pub const CPU: &str = "cpu.pressure";
/// `memory.pressure`.
pub const MEMORY: &str = "memory.pressure";
/// `io.pressure`.
pub const IO: &str = "io.pressure";

/// One line of a PSI file.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct PsiLine {
    /// `avg10`, percent.
    pub avg10: f64,
    /// `avg60`, percent.
    pub avg60: f64,
    /// `avg300`, percent.
    pub avg300: f64,
    /// `total`, microseconds.
    pub total_us: u64,
}

/// A PSI file (`cpu.pressure`, `memory.pressure`, `io.pressure`).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct PsiReading {
    /// The `some` line.
    pub some: PsiLine,
    /// The `full` line (absent for `cpu.pressure` on older kernels).
    pub full: Option<PsiLine>,
}

/// A PSI file (`some avg10=0.00 avg60=0.00 avg300=0.00 total=0` and maybe a `full` line).
pub fn parse_psi(text: &str) -> Option<PsiReading> {
    let line = |kind: &str| -> Option<PsiLine> {
        let rest = text.lines().find_map(|l| l.strip_prefix(kind))?;
        let field = |name: &str| rest.split_whitespace().find_map(|f| f.strip_prefix(name));
        Some(PsiLine {
            avg10: field("avg10=")?.parse().ok()?,
            avg60: field("avg60=")?.parse().ok()?,
            avg300: field("avg300=")?.parse().ok()?,
            total_us: field("total=")?.parse().ok()?,
        })
    };
    Some(PsiReading {
        some: line("some ")?,
        full: line("full "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psi_lines() {
        let text = "some avg10=1.50 avg60=0.20 avg300=0.00 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n";
        let psi = parse_psi(text).expect("psi");
        assert!((psi.some.avg10 - 1.5).abs() < 1e-9);
        assert_eq!(psi.some.total_us, 12345);
        assert_eq!(psi.full.map(|f| f.total_us), Some(7));
        assert!(parse_psi("some avg10=x\n").is_none());
    }
}
