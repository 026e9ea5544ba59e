//! `twinlog-perf report RUN.json... --html OUT.html`: several runs side by side on one
//! self-contained page. Charts are inline SVG drawn here (no JavaScript, no external
//! style sheets or fonts), so the file can be attached to an issue or opened offline.

use std::fmt::Write as _;

use crate::report::RunReport;
use crate::util::thousands;

/// One color per run, in run order (repeating after eight).
const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
];
const CHART_WIDTH: f64 = 760.0;
const LINE_CHART_HEIGHT: f64 = 320.0;
const MARGIN_LEFT: f64 = 70.0;
const MARGIN_RIGHT: f64 = 20.0;
const MARGIN_TOP: f64 = 34.0;
const MARGIN_BOTTOM: f64 = 44.0;

fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A short number for axis labels and bar ends.
fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// A round step so that `span` is covered by about `ticks` steps.
fn nice_step(span: f64, ticks: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / ticks;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Horizontal bars, one per item: (label, value, text after the bar). Each label sits
/// above its bar, so long run names are never cut.
pub fn bar_chart(title: &str, unit: &str, items: &[(String, f64, String)]) -> String {
    let row = 44.0;
    let left = 10.0;
    let height = MARGIN_TOP + row * items.len() as f64 + 10.0;
    let plot_width = CHART_WIDTH - left - 230.0;
    let max = items.iter().map(|i| i.1).fold(0.0, f64::max).max(1e-9);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{CHART_WIDTH}" height="{height}" viewBox="0 0 {CHART_WIDTH} {height}" role="img"><title>{t}</title><text x="10" y="20" class="title">{t} ({u})</text>"#,
        t = escape(title),
        u = escape(unit)
    );
    for (i, (label, value, note)) in items.iter().enumerate() {
        let y = MARGIN_TOP + row * i as f64;
        let w = (value / max * plot_width).max(1.0);
        let _ = write!(
            s,
            r#"<text x="{left}" y="{ly}">{label}</text><rect x="{left}" y="{by}" width="{w:.1}" height="20" fill="{c}"><title>{label}: {v} {u}</title></rect><text x="{nx:.1}" y="{ty}">{v} {u}{note}</text>"#,
            ly = y + 10.0,
            by = y + 15.0,
            ty = y + 30.0,
            label = escape(label),
            c = color(i),
            v = short(*value),
            u = escape(unit),
            nx = left + w + 6.0,
            note = escape(note),
        );
    }
    s.push_str("</svg>");
    s
}

/// A tick label with as many decimals as the tick step needs.
fn tick_label(v: f64, step: f64) -> String {
    if step >= 1.0 || v == 0.0 {
        return short(v);
    }
    let decimals = (-step.log10().floor()).clamp(0.0, 6.0) as usize;
    format!("{v:.decimals$}")
}

/// One line of a line chart: label, color index, points.
pub type Series = (String, usize, Vec<(f64, f64)>);

/// How the x axis of a line chart is labelled.
pub enum XAxis<'a> {
    /// Numbers (seconds).
    Linear(&'a str),
    /// Evenly spaced named points (percentiles); x values are indexes into this.
    Categories(&'a [&'a str]),
}

/// Lines, one per series: (label, color index, points). `log_y` for latencies.
pub fn line_chart(
    title: &str,
    x_axis: XAxis<'_>,
    y_label: &str,
    series: &[Series],
    log_y: bool,
) -> String {
    let height = LINE_CHART_HEIGHT + 20.0 * series.len() as f64;
    let plot_w = CHART_WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let plot_h = LINE_CHART_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
    let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.2.iter().copied()).collect();
    let (x_min, x_max) = match &x_axis {
        XAxis::Categories(c) => (0.0, (c.len().max(2) - 1) as f64),
        XAxis::Linear(_) => {
            let lo = all.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
            let hi = all.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
            if lo.is_finite() && hi > lo {
                (lo.min(0.0), hi)
            } else {
                (0.0, 1.0)
            }
        }
    };
    let positive = |v: f64| if log_y { v.max(1e-3) } else { v };
    let y_hi = all
        .iter()
        .map(|p| positive(p.1))
        .fold(f64::NEG_INFINITY, f64::max);
    let y_lo = all
        .iter()
        .map(|p| positive(p.1))
        .fold(f64::INFINITY, f64::min);
    let (y_min, y_max) = if log_y {
        let lo = if y_lo.is_finite() { y_lo } else { 0.1 };
        let hi = if y_hi.is_finite() { y_hi } else { 10.0 };
        (
            10f64.powf(lo.log10().floor()),
            10f64.powf(hi.log10().ceil().max(lo.log10().floor() + 1.0)),
        )
    } else {
        let hi = if y_hi.is_finite() && y_hi > 0.0 {
            y_hi
        } else {
            1.0
        };
        let step = nice_step(hi, 5.0);
        (0.0, (hi / step).ceil() * step)
    };
    let sx = |x: f64| MARGIN_LEFT + (x - x_min) / (x_max - x_min) * plot_w;
    let sy = |y: f64| {
        let f = if log_y {
            (positive(y).log10() - y_min.log10()) / (y_max.log10() - y_min.log10())
        } else {
            (y - y_min) / (y_max - y_min)
        };
        MARGIN_TOP + plot_h - f.clamp(0.0, 1.0) * plot_h
    };
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{CHART_WIDTH}" height="{height}" viewBox="0 0 {CHART_WIDTH} {height}" role="img"><title>{t}</title><text x="10" y="20" class="title">{t}</text>"#,
        t = escape(title)
    );
    // Grid and y labels.
    let y_ticks: Vec<f64> = if log_y {
        let mut v = Vec::new();
        let mut t = y_min;
        while t <= y_max * 1.0001 {
            v.push(t);
            t *= 10.0;
        }
        v
    } else {
        let step = nice_step(y_max - y_min, 5.0);
        (0..=((y_max - y_min) / step).round() as usize)
            .map(|i| y_min + step * i as f64)
            .collect()
    };
    let y_step = if log_y {
        1.0
    } else {
        nice_step(y_max - y_min, 5.0)
    };
    for t in &y_ticks {
        let y = sy(*t);
        let _ = write!(
            s,
            r##"<line x1="{MARGIN_LEFT}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{lx}" y="{ty:.1}" text-anchor="end" class="axis">{v}</text>"##,
            x2 = MARGIN_LEFT + plot_w,
            lx = MARGIN_LEFT - 6.0,
            ty = y + 4.0,
            v = if log_y {
                short(*t)
            } else {
                tick_label(*t, y_step)
            }
        );
    }
    let axis_y = MARGIN_TOP + plot_h;
    match &x_axis {
        XAxis::Categories(c) => {
            for (i, name) in c.iter().enumerate() {
                let x = sx(i as f64);
                let _ = write!(
                    s,
                    r##"<line x1="{x:.1}" x2="{x:.1}" y1="{MARGIN_TOP}" y2="{axis_y}" stroke="#eee"/><text x="{x:.1}" y="{ty}" text-anchor="middle" class="axis">{n}</text>"##,
                    ty = axis_y + 16.0,
                    n = escape(name)
                );
            }
        }
        XAxis::Linear(label) => {
            let step = nice_step(x_max - x_min, 8.0);
            let mut t = (x_min / step).ceil() * step;
            while t <= x_max + 1e-9 {
                let x = sx(t);
                let _ = write!(
                    s,
                    r#"<text x="{x:.1}" y="{ty}" text-anchor="middle" class="axis">{v}</text>"#,
                    ty = axis_y + 16.0,
                    v = tick_label(t, step)
                );
                t += step;
            }
            let _ = write!(
                s,
                r#"<text x="{x:.1}" y="{y}" text-anchor="middle" class="axis">{l}</text>"#,
                x = MARGIN_LEFT + plot_w / 2.0,
                y = axis_y + 32.0,
                l = escape(label)
            );
        }
    }
    let _ = write!(
        s,
        r##"<text x="14" y="{y:.1}" transform="rotate(-90 14 {y:.1})" text-anchor="middle" class="axis">{l}</text><rect x="{MARGIN_LEFT}" y="{MARGIN_TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>"##,
        y = MARGIN_TOP + plot_h / 2.0,
        l = escape(y_label)
    );
    for (label, ci, points) in series {
        if points.is_empty() {
            continue;
        }
        let path: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
            .collect();
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{p}"><title>{l}</title></polyline>"#,
            c = color(*ci),
            p = path.join(" "),
            l = escape(label)
        );
        if points.len() <= 12 {
            for (x, y) in points {
                let _ = write!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{c}"><title>{l}: {v}</title></circle>"#,
                    sx(*x),
                    sy(*y),
                    c = color(*ci),
                    l = escape(label),
                    v = short(*y)
                );
            }
        }
    }
    // Legend below the plot, one entry a row.
    for (i, (label, ci, _)) in series.iter().enumerate() {
        let x = MARGIN_LEFT;
        let y = LINE_CHART_HEIGHT + 20.0 * i as f64 + 4.0;
        let _ = write!(
            s,
            r#"<rect x="{x:.1}" y="{ry:.1}" width="14" height="4" fill="{c}"/><text x="{tx:.1}" y="{y:.1}" class="axis">{l}</text>"#,
            ry = y - 6.0,
            c = color(*ci),
            tx = x + 20.0,
            l = escape(label)
        );
    }
    s.push_str("</svg>");
    s
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}\
h1{font-size:22px}h2{font-size:18px;margin-top:28px}\
svg{background:#fff;border:1px solid #eee;margin:6px 0}\
svg text{font-size:12px;fill:#333}svg text.title{font-size:14px;font-weight:bold}\
svg text.axis{font-size:11px;fill:#555}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:4px 8px;text-align:right}\
td.l,th.l{text-align:left}code{font-size:12px}.charts{display:flex;flex-wrap:wrap;gap:12px}";

/// Renders `runs` as one HTML page.
pub fn render(title: &str, runs: &[RunReport]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1><p>{n} runs. MB = 10<sup>6</sup> bytes of record batches as sent and stored; latencies in milliseconds.</p>",
        t = escape(title),
        n = runs.len()
    );

    // Throughput.
    let bars: Vec<(String, f64, String)> = runs
        .iter()
        .filter_map(|r| {
            r.headline().map(|t| {
                (
                    r.label.clone(),
                    t.mb_per_s,
                    format!(", {} records/s", thousands(t.records_per_s.round() as u64)),
                )
            })
        })
        .collect();
    h.push_str("<h2>Throughput</h2><div class=\"charts\">");
    if !bars.is_empty() {
        h.push_str(&bar_chart(
            "Throughput (mirror runs: catch-up)",
            "MB/s",
            &bars,
        ));
    }
    h.push_str("</div>");

    // Latency percentiles.
    let cats = ["p50", "p90", "p99", "p99.9", "max"];
    let lat: Vec<Series> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            r.headline_latency().map(|(kind, l)| {
                (
                    format!("{} ({kind})", r.label),
                    i,
                    l.points()
                        .iter()
                        .enumerate()
                        .map(|(x, (_, ms))| (x as f64, *ms))
                        .collect(),
                )
            })
        })
        .collect();
    if !lat.is_empty() {
        h.push_str("<h2>Latency percentiles</h2><div class=\"charts\">");
        h.push_str(&line_chart(
            "Latency by percentile (log scale)",
            XAxis::Categories(&cats),
            "ms",
            &lat,
            true,
        ));
        h.push_str("</div>");
    }

    // Throughput over time.
    let over_time: Vec<Series> = runs
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.series.is_empty())
        .map(|(i, r)| {
            let consumed = r.workload == "consume";
            (
                r.label.clone(),
                i,
                r.series
                    .iter()
                    .map(|p| {
                        (
                            p.t_s,
                            if consumed {
                                p.consumed_mb_per_s
                            } else {
                                p.produced_mb_per_s
                            },
                        )
                    })
                    .collect(),
            )
        })
        .collect();
    if !over_time.is_empty() {
        h.push_str("<h2>Throughput over time</h2><div class=\"charts\">");
        h.push_str(&line_chart(
            "Throughput each second (consume runs: consumed, others: produced)",
            XAxis::Linear("seconds"),
            "MB/s",
            &over_time,
            false,
        ));
        h.push_str("</div>");
    }

    // Mirroring.
    let mirrors: Vec<(usize, &RunReport)> = runs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.mirror.is_some())
        .collect();
    if !mirrors.is_empty() {
        h.push_str("<h2>Mirroring</h2><div class=\"charts\">");
        let catch_up: Vec<Series> = mirrors
            .iter()
            .filter_map(|(i, r)| {
                let m = r.mirror.as_ref()?;
                Some((
                    r.label.clone(),
                    *i,
                    m.catch_up
                        .series
                        .iter()
                        .map(|p| (p.t_s, p.mirrored_records as f64))
                        .collect(),
                ))
            })
            .collect();
        h.push_str(&line_chart(
            "Catch-up: records on the destination",
            XAxis::Linear("seconds since AddTopicsToMirror"),
            "records",
            &catch_up,
            false,
        ));
        let lag_ms: Vec<Series> = mirrors
            .iter()
            .filter_map(|(i, r)| {
                let s = r.mirror.as_ref()?.steady.as_ref()?;
                Some((
                    r.label.clone(),
                    *i,
                    s.series.iter().map(|p| (p.t_s, p.lag_ms as f64)).collect(),
                ))
            })
            .collect();
        if !lag_ms.is_empty() {
            let lag_records: Vec<Series> = mirrors
                .iter()
                .filter_map(|(i, r)| {
                    let s = r.mirror.as_ref()?.steady.as_ref()?;
                    Some((
                        r.label.clone(),
                        *i,
                        s.series
                            .iter()
                            .map(|p| (p.t_s, p.lag_records as f64))
                            .collect(),
                    ))
                })
                .collect();
            h.push_str(&line_chart(
                "Steady rate: mirror lag in milliseconds (newest record timestamps)",
                XAxis::Linear("seconds"),
                "ms",
                &lag_ms,
                false,
            ));
            h.push_str(&line_chart(
                "Steady rate: mirror lag in records (DescribeMirrors)",
                XAxis::Linear("seconds"),
                "records",
                &lag_records,
                false,
            ));
        }
        h.push_str("</div>");
    }

    // Numbers.
    h.push_str("<h2>Numbers</h2><table><tr><th class=\"l\">run</th><th class=\"l\">workload</th><th>MB/s</th><th>records/s</th><th>records</th><th class=\"l\">latency</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>errors</th></tr>");
    for (i, r) in runs.iter().enumerate() {
        let t = r.headline();
        let _ = write!(
            h,
            "<tr><td class=\"l\"><span style=\"color:{c}\">&#9632;</span> {l}</td><td class=\"l\">{w}</td><td>{mb}</td><td>{rs}</td><td>{n}</td>",
            c = color(i),
            l = escape(&r.label),
            w = escape(&r.workload),
            mb = t.map_or("-".into(), |t| format!("{:.1}", t.mb_per_s)),
            rs = t.map_or("-".into(), |t| thousands(t.records_per_s.round() as u64)),
            n = t.map_or("-".into(), |t| thousands(t.records)),
        );
        match r.headline_latency() {
            Some((kind, l)) => {
                let _ = write!(h, "<td class=\"l\">{kind}</td>");
                for (_, ms) in l.points() {
                    let _ = write!(h, "<td>{ms:.2}</td>");
                }
            }
            None => {
                h.push_str("<td class=\"l\">-</td><td></td><td></td><td></td><td></td><td></td>")
            }
        }
        let _ = write!(h, "<td>{}</td></tr>", r.errors.values().sum::<u64>());
    }
    h.push_str("</table>");
    if mirrors
        .iter()
        .any(|(_, r)| r.mirror.as_ref().is_some_and(|m| m.steady.is_some()))
    {
        h.push_str("<h2>Mirror lag</h2><table><tr><th class=\"l\">run</th><th>rate (records/s)</th><th>lag records p50</th><th>p99</th><th>max</th><th>lag ms p50</th><th>p99</th><th>max</th></tr>");
        for (_, r) in &mirrors {
            if let Some(s) = r.mirror.as_ref().and_then(|m| m.steady.as_ref()) {
                let _ = write!(
                    h,
                    "<tr><td class=\"l\">{}</td><td>{}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td></tr>",
                    escape(&r.label),
                    thousands(s.rate.round() as u64),
                    s.lag_records.p50,
                    s.lag_records.p99,
                    s.lag_records.max,
                    s.lag_ms.p50,
                    s.lag_ms.p99,
                    s.lag_ms.max
                );
            }
        }
        h.push_str("</table>");
    }
    h.push_str("<h2>Runs</h2><table><tr><th class=\"l\">run</th><th class=\"l\">date</th><th class=\"l\">machine</th><th class=\"l\">command</th></tr>");
    for r in runs {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{} cores, {}</td><td class=\"l\"><code>{}</code></td></tr>",
            escape(&r.label),
            escape(&r.date),
            r.machine.cores,
            escape(&r.machine.cpu_model),
            escape(&r.command)
        );
    }
    h.push_str("</table></body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{LatencySummary, SeriesPoint, Throughput};

    fn run(label: &str, mb: f64) -> RunReport {
        let mut r = RunReport::new("produce", Some(label), String::new());
        r.produce = Some(Throughput::new(1000, (mb * 1e6) as u64, 1.0));
        r.produce_latency = Some(LatencySummary {
            count: 10,
            mean_ms: 2.0,
            p50_ms: 1.0,
            p90_ms: 2.0,
            p99_ms: 5.0,
            p99_9_ms: 9.0,
            max_ms: 20.0,
        });
        r.series = (1..=3)
            .map(|t| SeriesPoint {
                t_s: f64::from(t),
                produced_mb_per_s: mb,
                ..SeriesPoint::default()
            })
            .collect();
        r
    }

    #[test]
    fn page_has_charts_and_escapes_labels() {
        let page = render("runs <1>", &[run("a & b", 100.0), run("<c>", 50.0)]);
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.matches("<svg").count() >= 3, "{page}");
        assert!(page.contains("a &amp; b"));
        assert!(page.contains("&lt;c&gt;"));
        assert!(!page.contains("<c>"));
        assert!(!page.contains("<script"));
        assert!(
            !page.contains("http://")
                || page.matches("http://").count()
                    == page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
        );
    }

    #[test]
    fn empty_and_degenerate_inputs_render() {
        let page = render("none", &[]);
        assert!(page.contains("0 runs"));
        let flat = line_chart(
            "t",
            XAxis::Linear("s"),
            "y",
            &[("x".into(), 0, vec![(0.0, 0.0)])],
            true,
        );
        assert!(!flat.contains("NaN"), "{flat}");
        let flat = line_chart("t", XAxis::Linear("s"), "y", &[], false);
        assert!(!flat.contains("NaN"), "{flat}");
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(10.0, 5.0), 2.0);
        assert_eq!(nice_step(0.0, 5.0), 1.0);
        assert_eq!(nice_step(730.0, 5.0), 200.0);
        assert_eq!(short(1_500_000.0), "1.5M");
    }
}
