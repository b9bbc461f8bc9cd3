//! Output that reads like `kubectl`'s: its relative durations and its padded tables. Shared by
//! `headroomctl` and the standalone shim's event listing.

/// kubectl's `HumanDuration` for LAST SEEN ("5s", "3m2s", "2h").
pub fn human_duration(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..120 => format!("{s}s"),
        120..600 if s % 60 != 0 => format!("{}m{}s", s / 60, s % 60),
        120..10_800 => format!("{}m", s / 60),
        _ => format!("{}h", s / 3600),
    }
}

/// Columns padded to the widest cell, 3 spaces apart, the last one free, as kubectl prints them.
pub fn table<R: AsRef<[S]>, S: AsRef<str>>(header: &[&str], rows: &[R]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row.as_ref()) {
            *w = (*w).max(c.as_ref().len());
        }
    }
    let line = |cells: Vec<&str>| {
        let n = cells.len();
        let mut out = String::new();
        for (i, c) in cells.into_iter().enumerate() {
            if i + 1 == n {
                out.push_str(c);
            } else {
                out.push_str(&format!("{c:<w$}   ", w = widths.get(i).copied().unwrap_or(0)));
            }
        }
        out.trim_end().to_string()
    };
    let mut out = vec![line(header.to_vec())];
    out.extend(
        rows.iter()
            .map(|r| line(r.as_ref().iter().map(AsRef::as_ref).collect())),
    );
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(-3), "0s");
    }

    #[test]
    fn columns_are_padded_to_the_widest_cell() {
        let text = table(&["A", "BB", "C"], &[vec!["xxx", "y", "z z"]]);
        assert_eq!(text, "A     BB   C\nxxx   y    z z");
    }
}
