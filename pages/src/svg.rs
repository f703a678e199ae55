//! Charts drawn as inline SVG: a line over time, bars per day, stacked
//! bars of counts and horizontal bars of scores. Each is one `<svg>` with
//! `role="img"`, a `<title>` and an `aria-label` that says in words what it
//! shows, so a screen reader gets the point and a page needs no script or
//! outside asset. Coordinates are written with one decimal: the same data
//! gives the same bytes.

use std::fmt::Write;

/// Text as XML character data or an attribute value.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape_into(&mut out, text);
    out
}

/// [`escape`] onto `out`: the runs between the five characters copied
/// whole.
pub fn escape_into(out: &mut String, text: &str) {
    let mut from = 0;
    for (i, byte) in text.bytes().enumerate() {
        let entity = match byte {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            b'\'' => "&#39;",
            _ => continue,
        };
        out.push_str(&text[from..i]);
        out.push_str(entity);
        from = i + 1;
    }
    out.push_str(&text[from..]);
}

/// One decimal, without a trailing `.0`.
fn n(value: f64) -> String {
    let rounded = (value * 10.0).round() / 10.0;
    if rounded.fract() == 0.0 {
        format!("{}", rounded as i64)
    } else {
        format!("{rounded:.1}")
    }
}

fn open(width: u32, height: u32, label: &str) -> String {
    let label = escape(label);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" \
         height=\"{height}\" role=\"img\" aria-label=\"{label}\"><title>{label}</title>"
    )
}

/// `values` at even steps as a line over a light area: a sparkline, or a
/// larger chart of the same kind.
pub fn line(values: &[u64], width: u32, height: u32, label: &str) -> String {
    let mut svg = open(width, height, label);
    let max = values.iter().copied().max().unwrap_or(0).max(1) as f64;
    let (w, h) = (width as f64, height as f64 - 2.0);
    let step = if values.len() > 1 { w / (values.len() - 1) as f64 } else { 0.0 };
    let points: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(i, v)| format!("{},{}", n(i as f64 * step), n(1.0 + h - *v as f64 / max * h)))
        .collect();
    if values.len() == 1 {
        // One point: a flat line across, at its height.
        let y = n(1.0 + h - values[0] as f64 / max * h);
        let _ = write!(svg, "<path d=\"M0 {y}H{width}\" fill=\"none\" stroke=\"#0a56c2\" stroke-width=\"2\"/>");
    } else if !values.is_empty() {
        let _ = write!(
            svg,
            "<polygon points=\"0,{height} {} {},{height}\" fill=\"#dbe7f9\"/>\
             <polyline points=\"{}\" fill=\"none\" stroke=\"#0a56c2\" stroke-width=\"2\" \
             stroke-linejoin=\"round\"/>",
            points.join(" "),
            n(w),
            points.join(" ")
        );
    }
    svg.push_str("</svg>");
    svg
}

/// One bar per value, left to right, on a base line.
pub fn bars(values: &[u64], width: u32, height: u32, label: &str) -> String {
    let mut svg = open(width, height, label);
    let max = values.iter().copied().max().unwrap_or(0).max(1) as f64;
    let (w, h) = (width as f64, height as f64 - 1.0);
    let slot = w / values.len().max(1) as f64;
    let bar = (slot * 0.8).max(1.0);
    for (i, v) in values.iter().enumerate().filter(|(_, v)| **v > 0) {
        let top = h - *v as f64 / max * h;
        let _ = write!(
            svg,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#1a7f37\"/>",
            n(i as f64 * slot + (slot - bar) / 2.0),
            n(top),
            n(bar),
            n(h - top)
        );
    }
    let _ = write!(svg, "<path d=\"M0 {}H{width}\" stroke=\"#57606a\"/>", n(h + 0.5));
    svg.push_str("</svg>");
    svg
}

/// A segment of a stacked bar: its name (shown in the legend) and colour.
pub struct Segment<'a> {
    pub name: &'a str,
    pub colour: &'a str,
}

/// One horizontal bar per row, each split into `segments` by the row's
/// counts (in `segments`' order), with the row's name above its bar and a
/// legend below.
pub fn stacked(rows: &[(String, Vec<u64>)], segments: &[Segment], width: u32, label: &str) -> String {
    const ROW: u32 = 34;
    let legend_rows = 1 + segments.len() as u32 / 4;
    let height = rows.len() as u32 * ROW + legend_rows * 20 + 6;
    let mut svg = open(width, height, label);
    svg.push_str("<g font-family=\"system-ui, sans-serif\" font-size=\"12\" fill=\"#1b1f24\">");
    for (r, (name, counts)) in rows.iter().enumerate() {
        let y = r as u32 * ROW;
        let _ = write!(svg, "<text x=\"0\" y=\"{}\">{}</text>", y + 12, escape(name));
        let total: u64 = counts.iter().sum();
        let mut x = 0.0;
        for (count, segment) in counts.iter().zip(segments).filter(|(c, _)| **c > 0) {
            let w = *count as f64 / total as f64 * width as f64;
            let _ = write!(
                svg,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"14\" fill=\"{}\"><title>{}: {count}</title></rect>",
                n(x),
                y + 16,
                n(w),
                segment.colour,
                escape(segment.name)
            );
            x += w;
        }
    }
    let top = rows.len() as u32 * ROW + 8;
    for (i, segment) in segments.iter().enumerate() {
        let (col, row) = (i as u32 % 4, i as u32 / 4);
        let (x, y) = (col * (width / 4), top + row * 20);
        let _ = write!(
            svg,
            "<rect x=\"{x}\" y=\"{y}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            segment.colour,
            x + 16,
            y + 11,
            escape(segment.name)
        );
    }
    svg.push_str("</g></svg>");
    svg
}

/// One horizontal bar per named score out of `max`, the score written at
/// its end.
pub fn scores(rows: &[(String, f64)], max: f64, width: u32, label: &str) -> String {
    const ROW: u32 = 22;
    let label_width = width as f64 * 0.4;
    let track = width as f64 - label_width - 40.0;
    let mut svg = open(width, rows.len() as u32 * ROW, label);
    svg.push_str("<g font-family=\"system-ui, sans-serif\" font-size=\"12\" fill=\"#1b1f24\">");
    for (r, (name, score)) in rows.iter().enumerate() {
        let y = r as u32 * ROW;
        let w = (score / max).clamp(0.0, 1.0) * track;
        let _ = write!(
            svg,
            "<text x=\"0\" y=\"{}\">{}</text><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"12\" fill=\"#dbe7f9\"/>\
             <rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"12\" fill=\"#0a56c2\"/><text x=\"{}\" y=\"{}\">{}</text>",
            y + 14,
            escape(name),
            n(label_width),
            y + 4,
            n(track),
            n(label_width),
            y + 4,
            n(w),
            n(label_width + track + 6.0),
            y + 14,
            n(*score)
        );
    }
    svg.push_str("</g></svg>");
    svg
}

/// At most `most` values: evenly sized buckets, each its last value (for a
/// running total, the total at the bucket's end).
pub fn downsample(values: &[u64], most: usize) -> Vec<u64> {
    if values.len() <= most || most == 0 {
        return values.to_vec();
    }
    (1..=most).map(|b| values[(b * values.len()).div_ceil(most) - 1]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_charts_are_images() {
        for svg in [
            line(&[1, 5, 3], 100, 20, "a <b> & \"c\""),
            bars(&[0, 2, 1], 100, 20, "a <b> & \"c\""),
            stacked(&[("<h>".into(), vec![1, 2])], &[Segment { name: "x&y", colour: "#000" }], 200, "a <b>"),
            scores(&[("<s>".into(), 50.0)], 100.0, 200, "a <b>"),
        ] {
            assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>"), "{svg}");
            assert!(svg.contains("role=\"img\"") && svg.contains("<title>a &lt;b&gt;"), "{svg}");
            assert!(!svg.contains("<b>") && !svg.contains("<h>") && !svg.contains("<s>"), "{svg}");
        }
    }

    #[test]
    fn lines_span_the_chart_and_the_largest_value_reaches_the_top() {
        let svg = line(&[0, 10, 5], 100, 22, "x");
        assert!(svg.contains("<polyline points=\"0,21 50,1 100,11\""), "{svg}");
        let flat = line(&[7], 100, 22, "x");
        assert!(flat.contains("M0 1H100"), "{flat}");
        assert!(!line(&[], 100, 22, "x").contains("<poly"));
    }

    #[test]
    fn bars_are_drawn_for_values_above_zero_only() {
        let svg = bars(&[0, 4, 2, 0], 40, 21, "x");
        assert_eq!(svg.matches("<rect").count(), 2, "{svg}");
        assert!(svg.contains("x=\"11\" y=\"0\" width=\"8\" height=\"20\""), "{svg}");
        assert!(svg.contains("x=\"21\" y=\"10\" width=\"8\" height=\"10\""), "{svg}");
    }

    #[test]
    fn stacked_segments_fill_the_width_in_proportion() {
        let segments = [Segment { name: "a", colour: "#111" }, Segment { name: "b", colour: "#222" }];
        let svg = stacked(&[("row".into(), vec![1, 3])], &segments, 200, "x");
        assert!(svg.contains("x=\"0\" y=\"16\" width=\"50\" height=\"14\" fill=\"#111\"><title>a: 1</title>"), "{svg}");
        assert!(
            svg.contains("x=\"50\" y=\"16\" width=\"150\" height=\"14\" fill=\"#222\"><title>b: 3</title>"),
            "{svg}"
        );
    }

    #[test]
    fn downsampling_keeps_each_bucket_last_value() {
        let check = |values: &[u64], most, expected: &[u64]| assert_eq!(downsample(values, most), expected);
        check(&[1, 2, 3], 5, &[1, 2, 3]);
        check(&[1, 2, 3, 4, 5, 6], 3, &[2, 4, 6]);
        check(&[1, 2, 3, 4, 5, 6, 7], 3, &[3, 5, 7]);
        assert_eq!(downsample(&(1..=1000).collect::<Vec<_>>(), 120).len(), 120);
        assert_eq!(*downsample(&(1..=1000).collect::<Vec<_>>(), 120).last().unwrap(), 1000);
    }
}
