//! Output that reads like `kubectl`'s: its relative durations and its padded tables. Shared by
//! `headroomctl` and the standalone shim's event listing.

/// kubectl's `HumanDuration` (k8s.io/apimachinery `util/duration`) for LAST SEEN and every age:
/// "5s", "3m2s", "2h", "3h20m", "2d4h", "1y30d"; up to 1 s in the future is "0s" (clock skew),
/// further is "<invalid>".
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let minutes = s / 60;
    if minutes < 10 {
        return match s % 60 {
            0 => format!("{minutes}m"),
            rem => format!("{minutes}m{rem}s"),
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = s / 3600;
    let days = hours / 24;
    match hours {
        ..8 => match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        },
        8..48 => format!("{hours}h"),
        48..192 => match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        },
        192..17_520 => format!("{days}d"),
        17_520..70_080 => match days % 365 {
            0 => format!("{}y", days / 365),
            d => format!("{}y{d}d", days / 365),
        },
        _ => format!("{}y", days / 365),
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
        assert_eq!(human_duration(-1), "0s");
        assert_eq!(human_duration(-3), "<invalid>");
        // Past three hours: hours and minutes, then hours, days and hours, days, years.
        assert_eq!(human_duration(3 * 3600 + 20 * 60), "3h20m");
        assert_eq!(human_duration(4 * 3600), "4h");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(52 * 3600), "2d4h");
        assert_eq!(human_duration(72 * 3600), "3d");
        assert_eq!(human_duration(400 * 86_400), "400d");
        assert_eq!(human_duration(760 * 86_400), "2y30d");
        assert_eq!(human_duration(9 * 365 * 86_400), "9y");
    }

    #[test]
    fn columns_are_padded_to_the_widest_cell() {
        let text = table(&["A", "BB", "C"], &[vec!["xxx", "y", "z z"]]);
        assert_eq!(text, "A     BB   C\nxxx   y    z z");
    }
}
